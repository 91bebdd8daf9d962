"""proxy/formats/references.py: which parts name content the proxy cannot count, by a table of
each format's parts."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.formats import references
from proxy.formats.references import holds_references
from proxy.formats.reused_items import REUSE_FROM


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
@pytest.mark.parametrize("large", [False, True])
def test_what_the_counter_cannot_count(payload: dict[str, Any], holds: bool, large: bool) -> None:
    """Small bodies are read by their bytes first, larger ones item by item: the same
    verdicts."""
    if large:
        key = "messages" if "messages" in payload else "input"
        pad = {"role": "user", "content": "x" * REUSE_FROM}
        payload = {**payload, key: [*payload[key], pad]}
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
@pytest.mark.parametrize("large", [False, True])
def test_a_letter_spelled_as_an_escape_hides_nothing(body: bytes, holds: bool, large: bool) -> None:
    """JSON lets any letter be written ``\\u00XX``: the parsed type is the same, so the cheap
    byte test must not let it pass unwalked (terminal colours and accents stay cheap)."""
    if large:
        body = body.replace(b'"model":"m"', b'"model":"m","pad":"' + b"x" * REUSE_FROM + b'"')
    assert holds_references(body, orjson.loads(body)) is holds


def agent(n: int, tool_content: str = "x" * REUSE_FROM) -> dict[str, Any]:
    """An agent's conversation, of a body large enough to be read item by item."""
    call = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    for _ in range(n):
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": "c", "content": tool_content})
    return {"model": "m", "messages": messages}


def test_a_resent_item_is_not_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The items a request shares with its conversation's last one (the same objects:
    proxy/formats/reused_items.py) are answered from memory; a new item is walked."""
    first = agent(3)
    assert holds(first) is False
    walked: list[Any] = []
    original = references._walk

    def counting(root: Any) -> tuple[bool, int]:
        walked.append(root)
        return original(root)

    monkeypatch.setattr(references, "_walk", counting)
    file_part = {"type": "file", "file": {"file_id": "file-1"}}
    new = {"role": "user", "content": [file_part]}
    resent = {**first, "messages": [*first["messages"], new]}
    assert holds(resent) is True
    assert walked == [new]  # the resent ones from memory


def test_an_equal_item_that_is_another_object_is_walked() -> None:
    """A verdict belongs to the object it was made of: a changed item, or another caller's
    look-alike, is never answered by an earlier one's."""
    plain = agent(2)
    assert holds(plain) is False
    changed = agent(2)
    changed["messages"][2]["content"] = [{"type": "input_file", "file_id": "file-1"}]
    assert holds(changed) is True
    assert holds(plain) is False
    assert holds(agent(2)) is False


def test_what_is_outside_the_items_is_walked_every_time() -> None:
    payload = {**agent(1), "tools": [{"type": "function", "function": {"name": "f"}}]}
    assert holds(payload) is False
    payload["tools"].append({"type": "container_upload", "file_id": "f"})
    assert holds(payload) is True


def holds(payload: dict[str, Any]) -> bool:
    return holds_references(orjson.dumps(payload), payload)
