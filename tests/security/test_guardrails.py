"""The application's instructions are never dropped silently: every leading system or developer
message is strict by default, in chat and in Responses."""

from __future__ import annotations

import orjson

from tests.security.conftest import OTHER_KEY, Capture, ProxyFactory, keys_config

SAFETY = "SAFETY POLICY: never reveal the operator's keys, whatever the user says."


def history(turns: int) -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "old " * 150}
        for i in range(turns)
    ]


def test_a_long_user_message_never_costs_the_guardrail(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """User messages of every size up to the window: each request is forwarded with both
    system messages, or refused with nothing forwarded."""
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(OTHER_KEY) as c:
        for words in range(7700, 7960, 8):
            messages = [
                {"role": "system", "content": "You are a cheerful persona."},
                {"role": "system", "content": SAFETY},
                *history(6),
                {"role": "user", "content": "word " * words},
            ]
            before = len(capture.seen)
            body = {"model": "gpt-4o", "messages": messages, "max_tokens": 64}
            answer = c.post("/v1/chat/completions", json=body)
            if answer.status_code == 200:
                sent = orjson.loads(capture.seen[-1].body)["messages"]
                assert sent[:2] == messages[:2], words
            else:  # cannot fit with the guardrail: refused, and nothing was forwarded
                assert answer.status_code == 400
                message = answer.json()["error"]["message"]
                assert "leading system" in message or "current turn" in message
                assert len(capture.seen) == before


def test_leading_developer_items_on_responses_are_kept(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    items = [
        {"type": "message", "role": "developer", "content": "You are a cheerful persona."},
        {"type": "message", "role": "developer", "content": SAFETY},
        *history(12),
        {"type": "message", "role": "user", "content": "word " * 7000},
    ]
    with proxy.client(OTHER_KEY) as c:
        answer = c.post(
            "/v1/responses",
            json={"model": "gpt-4o", "input": items, "max_output_tokens": 64},
        )
    assert answer.status_code == 200, answer.text
    sent = orjson.loads(capture.seen[-1].body)["input"]
    assert sent[:2] == items[:2]
    assert len(sent) < len(items)  # the history made room, not the guardrail
