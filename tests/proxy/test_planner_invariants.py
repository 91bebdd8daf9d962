"""The full planner (sticky cuts, deep cuts, summaries, the reply reserve) over growing
conversations of every shape, in all three formats, at windows from 2k to 32k, at the
defaults: every request is answered, forwards its task and newest step as sent, within its
budget, and no plan ever falls back to the safe plan (tests/proxy/shapes.py)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.demo.upstream import SUMMARIZER_MARK
from tests.proxy.shapes import FORMATS, SHAPES, protected, requests
from tests.proxy.test_forwarding import BASE, running

PATHS = {"chat": "chat/completions", "responses": "responses", "anthropic": "messages"}
ANSWERS: dict[str, dict[str, Any]] = {
    "chat": {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "finish_reason":
             "stop", "message": {"role": "assistant", "content": "ok"}}]},
    "responses": {"id": "r", "object": "response", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                              "text": "ok"}]}]},
    "anthropic": {"id": "m", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                  "content": [{"type": "text", "text": "ok"}],
                  "usage": {"input_tokens": 1, "output_tokens": 1}},
}  # fmt: skip


def config(window: int, shape: str) -> dict[str, Any]:
    apis = ["chat_completions", "responses", "messages"]
    policy = {"rag": {"rules": [{"id": "documents", "match": {"position": "leading"},
                                 "tier": "rag", "strategy": "relevance_drop"}]}}  # fmt: skip
    return {
        "upstreams": {"up": {"base_url": BASE, "apis": apis}},
        "default_upstream": "up",
        "models": {
            "gpt-x": {"context_window": window, "tokenizer": "o200k_base"},
            "claude-x": {"context_window": window},
        },
        **({"policies": policy, "default_policy": "rag"} if shape == "rag" else {}),
    }


async def drive(shape: str, fmt: str, window: int, steps: int, seed: int) -> int:
    """Send the conversation, step by step; check every forwarded request. The number of
    requests that were trimmed."""
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        payload = orjson.loads(request.content)
        path = request.url.path.removeprefix("/v1/")
        first = (payload.get("messages") or [{}])[0]
        if path == "chat/completions" and str(first.get("content")).startswith(SUMMARIZER_MARK):
            return httpx.Response(200, json=ANSWERS["chat"])  # the summarizer's call
        sent.append(payload)
        return httpx.Response(200, json=ANSWERS[fmt])

    respx.post(url__regex=rf"{BASE}/(chat/completions|responses|messages)").mock(side_effect=answer)
    model = "claude-x" if fmt == "anthropic" else "gpt-x"
    trimmed = 0
    async with running(config(window, shape)) as client:
        for n, body in enumerate(requests(shape, fmt, steps, window, seed, model)):
            if fmt == "anthropic":
                body["max_tokens"] = 32000 if window >= 16_000 else window // 4
            got = await client.post(f"/v1/{PATHS[fmt]}", json=body)
            where = f"{shape} {fmt} {window} request {n}: {got.headers}"
            assert got.status_code == 200, (where, got.text)
            actions = got.headers["x-contextwarden-actions"]
            assert "plan-fallback" not in actions, where
            forwarded = sent[-1]
            check(fmt, body, forwarded, where)
            budget = got.headers["x-contextwarden-budget"]
            after = got.headers["x-contextwarden-tokens-after"]
            if budget != "unknown" and after.isdigit():
                assert int(after) <= int(budget), where
            before = got.headers["x-contextwarden-tokens-before"]
            trimmed += before.isdigit() and after.isdigit() and int(after) < int(before)
    return trimmed


def check(fmt: str, body: dict[str, Any], forwarded: dict[str, Any], where: str) -> None:
    """The leading instructions, the task and the newest step went as the client sent them."""
    lead, task, step = protected(fmt, body)
    assert protected(fmt, forwarded)[0] == lead, where
    conversation = forwarded["input" if fmt == "responses" else "messages"]
    if step:
        assert conversation[-len(step) :] == step, where
    elif task is not None:
        assert conversation[-1] == task, where
    if task is not None:
        assert task in conversation, where


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(SHAPES),
    fmt=st.sampled_from(FORMATS),
    window=st.sampled_from((2048, 4096, 8192, 16_000, 32_000)),
    seed=st.integers(0, 2**16),
)
@respx.mock
async def test_every_plan_keeps_the_post_condition(
    shape: str, fmt: str, window: int, seed: int
) -> None:
    await drive(shape, fmt, window, 24, seed)


@respx.mock
async def test_a_300_step_running_task_in_each_format() -> None:
    for fmt in FORMATS:
        trimmed = await drive("claude-code", fmt, 16_000, 300, 7)
        assert trimmed > 200, fmt
