"""In passthrough anybody may claim a team (``x-contextwarden-team``), and each caller brings its
own provider account: one caller's overflows shrank the window of every caller of the team it
claimed. What overflows teach is now kept per caller there (keys mode: per team, as before)."""

from __future__ import annotations

import orjson
from starlette.responses import Response

from tests.security.conftest import Capture, ProxyFactory, Seen

SMALL_ACCOUNT = "sk-small-tier-1313"


def per_account(seen: Seen) -> Response:
    """An upstream whose window depends on the account: 1,000 tokens for the small tier."""
    small = seen.headers.get("authorization") == f"Bearer {SMALL_ACCOUNT}"
    if small and len(seen.body) > 6000:  # about 1,000 tokens
        message = (
            "This model's maximum context length is 1000 tokens. However, your messages "
            "resulted in 2400 tokens. Please reduce the length of the messages."
        )
        error = {
            "message": message,
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
        return Response(orjson.dumps({"error": error}), 400, media_type="application/json")
    return Response(orjson.dumps({"id": "c", "choices": []}), media_type="application/json")


def body() -> dict[str, object]:
    turn = "Describe the next step of the plan and what could go wrong with it. " * 6
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {turn}"} for i in range(21)
    ]
    return {"model": "gpt-4o", "messages": messages, "max_tokens": 64}


def test_one_callers_overflow_does_not_shrink_anothers_window(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = per_account
    proxy = make_proxy(
        upstreams={"main": {"base_url": f"{capture.url}/v1"}},
        models={"gpt-4o": {"context_window": 16000, "tokenizer": "o200k_base"}},
        teams={"shared": {}},
        policies={"default": {"summarize": False}},
    )
    team = {"x-contextwarden-team": "shared"}
    with proxy.client(SMALL_ACCOUNT) as c:
        small = c.post("/v1/chat/completions", json=body(), headers=team)
    assert small.status_code == 200
    assert "overflow-retry" in small.headers["x-contextwarden-actions"]  # it learned its window
    with proxy.client("sk-large-tier-1414") as c:
        large = c.post("/v1/chat/completions", json=body(), headers=team)
    assert large.status_code == 200
    assert large.headers["x-contextwarden-actions"] == "none"  # sent whole: 16,000 still
    assert int(large.headers["x-contextwarden-budget"]) > 10_000
    with proxy.client(SMALL_ACCOUNT) as c:  # the small account keeps what it learned
        again = c.post("/v1/chat/completions", json=body(), headers=team)
    assert again.headers["x-contextwarden-retries"] == "0"
    assert int(again.headers["x-contextwarden-budget"]) < 1000
