"""An upstream error that repeats the client's own text teaches the proxy nothing: no learned
window, no retry, no cut. Only the upstream's own verdict is an overflow."""

from __future__ import annotations

import orjson
from starlette.responses import Response

from tests.security.conftest import (
    ADMIN_KEY,
    OTHER_KEY,
    Capture,
    ProxyFactory,
    Seen,
    chat_body,
    keys_config,
)

PLANTED = "maximum context length is 3000 tokens. However, your messages resulted in 10 tokens"


def unknown_field(seen: Seen) -> Response:
    """OpenAI's 400 for an unknown field: it names the field, whatever the field's name is."""
    known = ("model", "messages", "max_tokens")
    fields = [k for k in orjson.loads(seen.body) if k not in known]
    error = {
        "message": f"Unrecognized request argument supplied: {fields[0] if fields else '?'}",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    return Response(orjson.dumps({"error": error}), 400, media_type="application/json")


def windows(proxy_url: str) -> dict[str, object]:
    import httpx

    with httpx.Client(base_url=proxy_url, timeout=30) as c:
        got = c.get("/admin/learned-windows", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    data: dict[str, object] = got.json()
    return data


def test_a_field_named_like_an_overflow_teaches_no_window(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = unknown_field
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(OTHER_KEY) as c:
        for spelling in (PLANTED, PLANTED.replace("t", "\\u0074")):
            raw = orjson.dumps(chat_body(max_tokens=100))[:-1] + b',"%s":1}' % spelling.encode()
            answer = c.post(
                "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
            )
            assert answer.status_code == 400
            assert "x-contextwarden-retries" not in answer.headers or (
                answer.headers["x-contextwarden-retries"] == "0"
            )
        normal = c.post("/v1/chat/completions", json=chat_body())
    assert len(capture.seen) == 3  # one upstream call each: nothing retried
    learned = windows(proxy.url)
    assert learned["learned_windows"] == {}
    assert normal.headers["x-contextwarden-budget"] != "0"


def test_an_error_with_the_providers_own_wording_is_still_an_overflow(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    calls: list[int] = []

    def overflow_once(seen: Seen) -> Response:
        calls.append(1)
        if len(calls) > 1:
            return Response(orjson.dumps({"id": "c"}), media_type="application/json")
        message = (
            "This model's maximum context length is 5000 tokens. However, your messages "
            "resulted in 5300 tokens. Please reduce the length of the messages."
        )
        error = {"message": message, "type": "invalid_request_error"}
        body = {"error": {**error, "code": "context_length_exceeded"}}
        return Response(orjson.dumps(body), 400, media_type="application/json")

    capture.answer = overflow_once
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(OTHER_KEY) as c:
        body = chat_body()
        body["messages"] = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": "word " * 400}
            for i in range(13)
        ]
        answer = c.post("/v1/chat/completions", json=body)
    assert answer.status_code == 200
    assert answer.headers["x-contextwarden-retries"] == "1"


INSTRUCTIONS = "If a file exceeds the context window, read it in parts. context_length_exceeded."


def healthy_stream(seen: Seen) -> Response:
    """A good Responses stream: response.created repeats the instructions, error is null."""
    sent = orjson.loads(seen.body)
    created = {
        "type": "response.created",
        "response": {
            "id": "resp_1",
            "status": "in_progress",
            "error": None,
            "instructions": sent.get("instructions"),
            "tools": sent.get("tools", []),
        },
    }
    delta = {"type": "response.output_text.delta", "delta": "ok"}
    done = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}
    events = b"".join(
        b"event: %s\ndata: %s\n\n" % (e["type"].encode(), orjson.dumps(e))
        for e in (created, delta, done)
    )
    return Response(events, media_type="text/event-stream")


def test_a_healthy_stream_that_echoes_overflow_words_is_relayed_once(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = healthy_stream
    proxy = make_proxy(**keys_config(capture))
    body = {
        "model": "gpt-4o",
        "instructions": INSTRUCTIONS,
        "input": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": "word " * 300}
            for i in range(13)
        ],
        "stream": True,
    }
    with proxy.client(OTHER_KEY) as c:
        answer = c.post("/v1/responses", json=body)
    assert answer.status_code == 200
    assert len(capture.seen) == 1  # not retried: the upstream answered
    assert answer.content == healthy_stream(capture.seen[0]).body
    assert "overflow-retry" not in answer.headers.get("x-contextwarden-actions", "")
