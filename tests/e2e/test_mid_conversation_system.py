"""Claude Code puts ``{"role": "system"}`` messages inside ``messages`` (with its default tools,
and after its own compaction, to re-attach the files it had read). The upstream accepts them, so
the proxy does: forwarded as they are, in their place, byte for byte, for as long as the message
they follow is kept; when that message's turn is trimmed away, they go with it."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from tests.security.conftest import OTHER_KEY, Capture, ProxyFactory, Seen, keys_config

ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 10, "output_tokens": 1},
}
REATTACHED = {
    "role": "system",
    "content": [{"type": "text", "text": "<file path='a.py'>print('kept')</file>"}],
}


def answer(seen: Seen) -> Response:
    return Response(orjson.dumps(ANSWER), media_type="application/json")


def conversation(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "start"}, REATTACHED]
    for i in range(turns):
        out += [
            {"role": "assistant", "content": [{"type": "text", "text": f"a{i} " + "w " * 300}]},
            {"role": "user", "content": f"u{i} " + "w " * 300},
        ]
    return out


def proxy_for(capture: Capture, make_proxy: ProxyFactory) -> Any:
    config = keys_config(capture)
    config["upstreams"]["main"]["apis"] = ["messages"]
    return make_proxy(**config)


def post(proxy: Any, messages: list[dict[str, Any]]) -> Any:
    with proxy.client(OTHER_KEY) as c:
        body = {"model": "gpt-4o", "max_tokens": 64, "system": "You are Claude Code.",
                "messages": messages}  # fmt: skip
        return c.post("/v1/messages", json=body)


def test_a_system_message_inside_messages_goes_through(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = answer
    proxy = proxy_for(capture, make_proxy)
    messages = conversation(1)
    got = post(proxy, messages)
    assert got.status_code == 200, got.text
    assert orjson.loads(capture.seen[0].body)["messages"] == messages


def test_it_goes_with_the_turn_it_follows_and_stays_verbatim_in_the_current_one(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = answer
    proxy = proxy_for(capture, make_proxy)
    current = {"role": "system", "content": "<system-reminder>answer briefly</system-reminder>"}
    messages = [*conversation(40), current]
    got = post(proxy, messages)  # far over the 8000-token window
    assert got.status_code == 200, got.text
    assert "truncate" in got.headers["x-contextwarden-actions"]
    sent = orjson.loads(capture.seen[0].body)["messages"]
    assert len(sent) < len(messages)
    assert REATTACHED not in sent  # it went with the first turn, which was trimmed
    assert sent[-2:] == messages[-2:]  # the current turn's, in its place, byte for byte


def test_a_responses_role_the_proxy_does_not_know_goes_through_in_place(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """Never stricter than the upstream: a message item in a role besides the four the proxy
    knows is forwarded as it came, in its place (it was a 400 the upstream would not have
    given), and trimmed with the turn it follows."""
    critic = {"type": "message", "role": "critic", "content": "Check every step twice."}
    items: list[dict[str, Any]] = [{"role": "user", "content": "start"}, critic]
    for i in range(40):
        items += [
            {"role": "assistant", "content": f"a{i} " + "w " * 300},
            {"role": "user", "content": f"u{i} " + "w " * 300},
        ]
    items.append(critic)
    config = keys_config(capture)
    proxy = make_proxy(**config)
    with proxy.client(OTHER_KEY) as c:
        got = c.post("/v1/responses", json={"model": "gpt-4o", "input": items})
    assert got.status_code == 200, got.text
    sent = orjson.loads(capture.seen[0].body)["input"]
    assert sent.count(critic) == 1 and sent[-2:] == items[-2:]
    assert len(sent) < len(items)
