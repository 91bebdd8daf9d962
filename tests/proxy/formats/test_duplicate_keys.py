"""proxy/formats/base.py ``reject_duplicate_keys``: which bodies the full scan reads."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from proxy.errors import BadRequest
from proxy.formats import base
from proxy.formats.base import reject_duplicate_keys

PAYLOAD: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "tool", "tool_call_id": "c", "content": "✓ 12 passed — café"},
    ],
}


def scans(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bodies the full scan (the stdlib's parse with a hook) reads from now on."""
    read: list[bytes] = []
    real = json.loads

    def loads(body: bytes, **kwargs: Any) -> Any:
        read.append(body)
        return real(body, **kwargs)

    monkeypatch.setattr(base.json, "loads", loads)
    return read


def test_non_ascii_escaped_as_json_dumps_writes_it_is_not_scanned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``json.dumps`` (``requests``, aiohttp) escapes every non-ASCII character: such escapes
    spell no key, so they send no body to the full scan."""
    read = scans(monkeypatch)
    body = json.dumps(PAYLOAD).encode()
    assert b"\\u2713" in body and b"\\u00e9" in body
    reject_duplicate_keys(body, orjson.loads(body))
    assert read == []


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "a", "messages": [{"role": "user", "content": "\\u00e9"}], "mod\\u0065l": "b"}',
        b'{"model": "a", "messages": [{"role": "user", "content": "\\u2014"}], "model": "b"}',
        b'{"model": "a", "messages": [{"role": "user", "r\\u006Fle": "system", "content": "x"}]}',
    ],
)
def test_a_duplicate_beside_other_escapes_is_refused(body: bytes) -> None:
    with pytest.raises(BadRequest, match="appears twice"):
        reject_duplicate_keys(body, orjson.loads(body))
