"""Context-window fallbacks: a policy names larger-window models for the requests its model
cannot take whole (proxy/overflow/fallbacks.py)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.e2e.conftest import Stack, StackFactory

SMALL, BIG = "small-model", "big-model"


def fallback_stack(make_stack: StackFactory, **policy: Any) -> Stack:
    models = {
        SMALL: {"context_window": 1024, "tokenizer": "o200k_base", "policy": "fb"},
        BIG: {"context_window": 4096, "tokenizer": "o200k_base"},
    }
    return make_stack(window=4096, models=models, policies={"fb": {"fallbacks": [BIG], **policy}})


def ask(stack: Stack, messages: list[dict[str, Any]]) -> Any:
    return stack.client.chat.completions.with_raw_response.create(
        model=SMALL,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=64,
    )


SYSTEM = {"role": "system", "content": "Follow the house style in every answer. " * 150}


def test_a_request_its_model_cannot_take_goes_to_the_fallback(make_stack: StackFactory) -> None:
    stack = fallback_stack(make_stack)
    raw = ask(stack, [SYSTEM, {"role": "user", "content": "Hello"}])
    assert raw.http_response.status_code == 200
    assert raw.headers["x-contextwarden-model"] == BIG
    assert f"fallback {SMALL}->{BIG}" in raw.headers["x-contextwarden-actions"]
    assert stack.received[-1]["model"] == BIG
    assert stack.received[-1]["messages"][0] == SYSTEM  # whole, in the larger window
    metrics = httpx.get(f"{stack.proxy_url}/metrics").text
    assert any(
        line.startswith("contextwarden_requests_total") and f'model="{BIG}"' in line
        for line in metrics.splitlines()
    )


def test_without_a_fallback_it_is_refused(make_stack: StackFactory) -> None:
    models = {SMALL: {"context_window": 1024, "tokenizer": "o200k_base"}}
    stack = make_stack(window=4096, models=models)
    with pytest.raises(openai.BadRequestError):
        ask(stack, [SYSTEM, {"role": "user", "content": "Hello"}])
    assert not stack.received


def history(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for k in range(turns):
        out.append({"role": "user", "content": f"Question {k}: " + "why does it fail " * 20})
        out.append({"role": "assistant", "content": f"Answer {k}: " + "because of a bug " * 20})
    return [*out, {"role": "user", "content": "And now?"}]


@pytest.mark.parametrize(("share", "answered_by"), [(0.5, BIG), (None, SMALL)])
def test_a_loss_above_the_share_goes_to_the_fallback(
    make_stack: StackFactory, share: float | None, answered_by: str
) -> None:
    """Fitting the small window would drop most of this conversation: with
    ``fallback_on_loss: 0.5`` the larger model takes it whole; without, it is trimmed."""
    stack = fallback_stack(make_stack, **({"fallback_on_loss": share} if share else {}))
    messages = history(12)
    raw = ask(stack, messages)
    assert stack.received[-1]["model"] == answered_by
    if answered_by == BIG:
        assert stack.received[-1]["messages"] == messages
        assert raw.headers["x-contextwarden-model"] == BIG
    else:
        assert len(stack.received[-1]["messages"]) < len(messages)
        assert "x-contextwarden-model" not in raw.headers
