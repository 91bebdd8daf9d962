"""proxy/formats/references.py: which parts name content the proxy cannot count, by a table of
each format's parts."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.formats.references import holds_references


def message(part: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": [part]}]}


@pytest.mark.parametrize(
    ("payload", "holds"),
    [
        ({"model": "m", "input": [{"role": "user", "content": [
            {"type": "input_file", "file_id": "file-1"}]}]}, True),
        ({"model": "m", "input": [{"role": "user", "content": [
            {"type": "input_file", "file_url": "https://x/y.pdf"}]}]}, True),
        ({"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": [
            {"type": "input_file", "file_data": "data:application/pdf;base64,AAAA"}]}]}, True),
        (message({"type": "file", "file": {"file_id": "file-1"}}), True),
        (message({"type": "document", "source": {"type": "url", "url": "https://x/y.pdf"}}),
         True),
        (message({"type": "document", "source": {"type": "file", "file_id": "file_1"}}), True),
        (message({"type": "document", "source": {"type": "base64", "data": "JVBER"}}), True),
        (message({"type": "image", "source": {"type": "file", "file_id": "file_1"}}), True),
        (message({"type": "container_upload", "file_id": "file_1"}), True),
        (message({"type": "document", "source": {"type": "text", "data": "plain"}}), False),
        (message({"type": "text", "text": 'a "file" named "document" with "input_file"'}), False),
        (message({"type": "image_url", "image_url": {"url": "https://x/y.png"}}), False),
        ({"model": "m", "messages": [{"role": "user", "content": "hello"}]}, False),
    ],
)  # fmt: skip
def test_what_the_counter_cannot_count(payload: dict[str, Any], holds: bool) -> None:
    assert holds_references(orjson.dumps(payload), payload) is holds
