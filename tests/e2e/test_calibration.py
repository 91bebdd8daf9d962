"""Usage calibration of estimated models, end to end: the upstream's own prompt counts (its
``usage``) teach the proxy how its estimate runs, per team and model, and persist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.conftest import StackFactory

FILLER = "The deployment failed because the health check timed out after the migration. "


def test_an_estimate_that_runs_low_shrinks_the_budget_before_the_upstream_overflows(
    make_stack: StackFactory,
) -> None:
    """The upstream counts 1.3x what the proxy's plain cl100k estimate says. After three
    answers the budget is the window over the learned ratio, and a growing conversation never
    needs an overflow retry again."""
    models = {"est-model": {"context_window": 3000, "tokenizer": "estimate"}}
    stack = make_stack(
        window=3000, count_scale=1.3, models=models, trimming={"estimate_ratio": 1.0}
    )
    messages: list[dict[str, Any]] = []
    budgets, retries = [], []
    for turn in range(30):
        messages.append({"role": "user", "content": f"{turn}: " + FILLER * 3})
        raw = stack.client.chat.completions.with_raw_response.create(
            model="est-model", messages=messages, max_tokens=100
        )
        budgets.append(int(raw.headers["x-contextwarden-budget"]))
        retries.append(int(raw.headers["x-contextwarden-retries"]))
        messages.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    assert budgets[-1] < budgets[0] / 1.25  # 3000 / (1.3 * 1.02), less reserve and margin
    assert sum(retries[5:]) == 0  # calibrated: nothing over the window was sent again


def test_an_estimate_that_runs_high_gives_its_room_back_and_the_ratio_persists(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """Claude-style: the proxy estimates 1.2x cl100k; the upstream's Anthropic tokenizer counts
    less. The budget grows to what the upstream really allows, and a restarted proxy starts
    from the persisted ratio."""
    upstream_app = create_upstream(window=6000)
    with BackgroundServer(upstream_app) as upstream:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1", "apis": ["messages"]}},
            "default_upstream": "demo",
            "models": {"claude-demo": {"context_window": 6000, "tokenizer": "estimate"}},
            "data_dir": str(tmp_path),
            "policies": {"default": {"summarize": False}},
        }

        def budgets(n: int) -> list[int]:
            with (
                BackgroundServer(create_app(load_settings(None, **config))) as proxy,
                anthropic.Anthropic(base_url=proxy.url, api_key="x", max_retries=0) as client,
            ):
                out = []
                for k in range(n):
                    raw = client.messages.with_raw_response.create(
                        model="claude-demo",
                        max_tokens=64,
                        messages=[{"role": "user", "content": f"{k} " + FILLER * 150}],
                    )
                    out.append(int(raw.headers["x-contextwarden-budget"]))
            return out

        first = budgets(5)
        assert first[-1] > first[0] * 1.05  # the estimate ran high: room given back
        again = budgets(1)
        assert abs(again[0] - first[-1]) <= first[-1] * 0.01  # restored from the store


def test_exact_tokenizers_are_never_calibrated(make_stack: StackFactory) -> None:
    stack = make_stack(window=3000, count_scale=1.3)
    seen = set()
    for k in range(5):
        raw = stack.client.chat.completions.with_raw_response.create(
            model="demo-model", messages=[{"role": "user", "content": f"{k}"}], max_tokens=50
        )
        seen.add(raw.headers["x-contextwarden-budget"])
    assert len(seen) == 1
    assert isinstance(stack.client, openai.OpenAI)
