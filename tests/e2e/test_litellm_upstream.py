"""`provider: litellm` upstreams: litellm.acompletion against the demo upstream, OpenAI format out."""

from __future__ import annotations

from tests.e2e.conftest import LITELLM_MODEL, MODEL, Stack, StackFactory
from tests.e2e.test_chat import long_chat


def test_completion_through_litellm(stack: Stack) -> None:
    raw = stack.client.chat.completions.with_raw_response.create(
        model=LITELLM_MODEL,
        messages=long_chat(40),
        max_tokens=100,  # type: ignore[arg-type]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert completion.object == "chat.completion"
    assert raw.headers["x-contextwarden-actions"] == "truncate_oldest,ledger"
    sent = stack.received[-1]
    assert sent["model"] == MODEL  # litellm called the upstream's own model name
    assert stack.upstream_count(sent) + 100 <= stack.window


def test_streaming_through_litellm(stack: Stack) -> None:
    chunks = list(
        stack.client.chat.completions.create(
            model=LITELLM_MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("I received 1 messages")


def test_litellm_context_window_error_is_recovered(make_stack: StackFactory) -> None:
    stack = make_stack(count_scale=1.6)  # the first attempt overflows
    raw = stack.client.chat.completions.with_raw_response.create(
        model=LITELLM_MODEL,
        messages=long_chat(40),
        max_tokens=100,  # type: ignore[arg-type]
    )
    assert raw.http_response.status_code == 200
    assert int(raw.headers["x-contextwarden-retries"]) >= 1
