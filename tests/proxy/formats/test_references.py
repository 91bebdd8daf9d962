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


@pytest.mark.parametrize(
    ("body", "holds"),
    [
        (rb'{"model":"m","input":[{"role":"user","content":[{"type":"input_fil\u0065",'
         rb'"file_id":"file-1"}]}]}', True),
        (rb'{"model":"m","messages":[{"role":"user","content":[{"type":"\u0064ocument",'
         rb'"source":{"type":"url","url":"https://x/y.pdf"}}]}]}', True),
        (rb'{"model":"m","messages":[{"role":"user","content":[{"type":"container\u005Fupload",'
         rb'"file_id":"f"}]}]}', True),
        (rb'{"model":"m","messages":[{"role":"user","content":"\u001b[31mred\u001b[0m \u00e9"}]}',
         False),
    ],
)  # fmt: skip
def test_a_letter_spelled_as_an_escape_hides_nothing(body: bytes, holds: bool) -> None:
    """JSON lets any letter be written ``\\u00XX``: the parsed type is the same, so the cheap
    byte test must not let it pass unwalked (terminal colours and accents stay cheap)."""
    assert holds_references(body, orjson.loads(body)) is holds
