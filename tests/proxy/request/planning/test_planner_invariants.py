"""The full planner (sticky cuts, deep cuts, summaries, the reply reserve) over growing
conversations of every shape, in all three formats, at windows from 2k to 32k, at the
defaults: every request is answered, forwards its task and newest step as sent, within its
budget, and no plan ever falls back to the safe plan (tests/proxy/shapes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.proxy.shapes import FORMATS, SHAPES, protected, requests
from tests.proxy.upstreams.test_forwarding import running

PATHS = {"chat": "chat/completions", "responses": "responses", "anthropic": "messages"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, Starlette]]:
    """The demo upstream, with a window no request reaches (the proxy's is the one tested):
    it answers every format, and the summarizer's calls too."""
    app = create_upstream(window=10_000_000)
    with BackgroundServer(app) as server:
        yield f"{server.url}/v1", app


def config(base: str, window: int, shape: str) -> dict[str, Any]:
    apis = ["chat_completions", "responses", "messages"]
    policy = {"rag": {"rules": [{"id": "documents", "match": {"position": "leading"},
                                 "tier": "rag", "strategy": "relevance_drop"}]}}  # fmt: skip
    return {
        "upstreams": {"up": {"base_url": base, "apis": apis}},
        "default_upstream": "up",
        "models": {
            "gpt-x": {"context_window": window, "tokenizer": "o200k_base"},
            "claude-x": {"context_window": window},
        },
        **({"policies": policy, "default_policy": "rag"} if shape == "rag" else {}),
    }


async def drive(
    upstream: tuple[str, Starlette], shape: str, fmt: str, window: int, steps: int, seed: int
) -> tuple[int, int]:
    """Send the conversation, step by step; check every forwarded request. How many were
    trimmed, and how many summarized."""
    base, app = upstream
    model = "claude-x" if fmt == "anthropic" else "gpt-x"
    trimmed = summarized = 0
    async with running(config(base, window, shape)) as client:
        for n, body in enumerate(requests(shape, fmt, steps, window, seed, model)):
            if fmt == "anthropic":
                body["max_tokens"] = 32000 if window >= 16_000 else window // 4
            got = await client.post(f"/v1/{PATHS[fmt]}", json=body)
            where = f"{shape} {fmt} {window} request {n}: {got.headers}"
            assert got.status_code == 200, (where, got.text)
            actions = got.headers["x-contextwarden-actions"]
            assert "plan-fallback" not in actions, where
            check(fmt, body, app.state.received[-1], where, "task_middle_cut" in actions)
            budget = got.headers["x-contextwarden-budget"]
            after = got.headers["x-contextwarden-tokens-after"]
            if budget != "unknown" and after.isdigit():
                assert int(after) <= int(budget), where
            before = got.headers["x-contextwarden-tokens-before"]
            trimmed += before.isdigit() and after.isdigit() and int(after) < int(before)
            summarized += "summarize" in actions
    return trimmed, summarized


def check(
    fmt: str, body: dict[str, Any], forwarded: dict[str, Any], where: str, task_cut: bool
) -> None:
    """The leading instructions, the task and the newest step went as the client sent them
    (the task, when it alone cannot fit, with its middle cut: its head and tail as sent)."""
    lead, task, step = protected(fmt, body)
    assert protected(fmt, forwarded)[0] == lead, where
    conversation = forwarded["input" if fmt == "responses" else "messages"]
    if step:
        assert conversation[-len(step) :] == step, where
    elif task is not None and not task_cut:
        assert conversation[-1] == task, where
    if task is not None and task_cut:
        text = orjson.dumps(task).decode()
        head, tail = text[:40], text[-40:]
        assert any(
            (sent := orjson.dumps(m).decode()).startswith(head) and sent.endswith(tail)
            for m in conversation
        ), where
    elif task is not None:
        assert task in conversation, where


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    shape=st.sampled_from(SHAPES),
    fmt=st.sampled_from(FORMATS),
    window=st.sampled_from((2048, 4096, 8192, 16_000, 32_000)),
    seed=st.integers(0, 2**16),
)
async def test_every_plan_keeps_the_post_condition(
    upstream: tuple[str, Starlette], shape: str, fmt: str, window: int, seed: int
) -> None:
    await drive(upstream, shape, fmt, window, 24, seed)


async def test_summaries_keep_it_too(upstream: tuple[str, Starlette]) -> None:
    """Chat turns long enough to be summarized, in each format: the summary stands for older
    turns, never for the current turn's task."""
    for fmt in FORMATS:
        trimmed, summarized = await drive(upstream, "one-call", fmt, 4096, 40, 3)
        assert summarized > 10 and trimmed > 20, fmt


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_300_step_running_task_in_each_format(
    upstream: tuple[str, Starlette], fmt: str
) -> None:
    trimmed, _ = await drive(upstream, "claude-code", fmt, 16_000, 300, 7)
    assert trimmed > 200, fmt
