"""A reply limit that does not fit beside the prompt is lowered, not paid for with the
conversation: Claude Code asks for ``max_tokens`` 64000 whatever the window, and the proxy used
to cut the prompt (or refuse) to make room for it, or pass the upstream's
"input length and `max_tokens` exceed context limit" through.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from proxy.demo.anthropic import AnthropicCounter
from tests.e2e.conftest import Stack, StackFactory

CLAUDE = "claude-demo"
UPSTREAM_WINDOW = 72_000
ASKED = 64_000
MESSAGES = [
    {"role": "user", "content": f"Line {k}: the build failed in module {k} again. " * 40}
    for k in range(40)
]


def stack_for(make_stack: StackFactory, proxy_window: int, **policy: Any) -> Stack:
    models = {CLAUDE: {"context_window": proxy_window, "tokenizer": "estimate"}}
    policies = {"default": policy} if policy else {}
    return make_stack(
        window=UPSTREAM_WINDOW,
        models=models,
        apis=["chat_completions", "messages"],
        policies=policies,
    )


def conversation() -> list[dict[str, Any]]:
    out = []
    for k, m in enumerate(MESSAGES):
        out.append(m)
        out.append({"role": "assistant", "content": f"Noted {k}."})
    return [*out, {"role": "user", "content": "What failed?"}]


def send(stack: Stack) -> Any:
    with anthropic.Anthropic(base_url=stack.proxy_url, api_key="sk-test", max_retries=0) as client:
        return client.messages.with_raw_response.create(
            model=CLAUDE, max_tokens=ASKED, messages=conversation(), timeout=60
        )


def test_the_limit_is_lowered_to_what_the_prompt_leaves(make_stack: StackFactory) -> None:
    stack = stack_for(make_stack, UPSTREAM_WINDOW)
    raw = send(stack)
    forwarded = stack.received[-1]
    assert len(forwarded["messages"]) == len(conversation())  # nothing was cut
    prompt = AnthropicCounter().prompt(forwarded)
    assert prompt + forwarded["max_tokens"] <= UPSTREAM_WINDOW
    assert 40_000 < forwarded["max_tokens"] < ASKED
    assert (
        f"max-tokens-lowered {ASKED}->{forwarded['max_tokens']}"
        in raw.headers["x-contextwarden-actions"]
    )


def test_the_upstreams_a_plus_b_error_is_recovered(make_stack: StackFactory) -> None:
    """The proxy believes in a larger window; the upstream's "a + b > c" teaches it."""
    stack = stack_for(make_stack, 200_000)
    raw = send(stack)
    assert raw.headers["x-contextwarden-retries"] == "1"
    first, retry = stack.received[-2:]
    assert first["max_tokens"] == ASKED
    assert len(retry["messages"]) == len(conversation())
    assert AnthropicCounter().prompt(retry) + retry["max_tokens"] <= UPSTREAM_WINDOW


@pytest.mark.parametrize("policy", [{"lower_max_tokens": False}, {"min_output_tokens": ASKED}])
def test_a_policy_keeps_the_limit_whole(make_stack: StackFactory, policy: dict[str, Any]) -> None:
    stack = stack_for(make_stack, UPSTREAM_WINDOW, **policy)
    send(stack)
    forwarded = stack.received[-1]
    assert forwarded["max_tokens"] == ASKED
    assert len(forwarded["messages"]) < len(conversation())  # the prompt made room instead


def system_of(tokens: int) -> str:
    """A system prompt the upstream's real tokenizer counts at about ``tokens``."""
    text, counter = "", AnthropicCounter()
    while counter.n(text) < tokens:
        text += "Follow the repository's style and read files before editing them. "
    return text


@pytest.mark.parametrize(("real", "answered"), [(3300, True), (6000, False)])
def test_an_estimate_refuses_only_when_it_is_certain(
    make_stack: StackFactory, real: int, answered: bool
) -> None:
    """The proxy only estimates Claude (cl100k x 1.2). A prompt the estimate puts over the
    window but the model may well take is forwarded, and the upstream decides; one that is
    over even at the estimate's known error is refused by the proxy (it was refused either
    way, though the upstream took it: worse than no proxy)."""
    window = 4000
    models = {CLAUDE: {"context_window": window, "tokenizer": "estimate"}}
    stack = make_stack(window=window, models=models, apis=["messages"])
    with anthropic.Anthropic(base_url=stack.proxy_url, api_key="sk-test", max_retries=0) as client:
        create = client.messages.with_raw_response.create
        kwargs: dict[str, Any] = {
            "model": CLAUDE,
            "max_tokens": 64,
            "system": system_of(real),
            "messages": [{"role": "user", "content": "Go."}],
        }
        if answered:
            raw = create(**kwargs)
            assert raw.status_code == 200
            assert "uncertain-forwarded" in raw.headers["x-contextwarden-actions"]
            assert AnthropicCounter().prompt(stack.received[-1]) + 64 <= window
        else:
            with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
                create(**kwargs)
            assert not stack.received
