"""Cache economy on the same conversations: contextwarden (summaries on) against
``litellm.utils.trim_messages`` and against forwarding untrimmed (as if the window allowed it).

Each workload grows one conversation through the real proxy and the demo upstream (4096-token
window, Anthropic-like prices: reads 0.1x, writes 1.25x). For each trimmer and each request:
whether the forwarded prompt kept the previous one as its prefix (after the first trim), and the
prompt's estimated cost with the provider's cache (strategies/cost.py; cached = the previous
prompt when it is the prefix), plus, for contextwarden, the summarizer calls' prompts at the
input price. trim_messages gets the same budget the proxy used.
"""

from __future__ import annotations

import random
import tempfile
from typing import Any

import openai

from bench.summaries import agent, chat
from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import WindowCounter, create_upstream
from strategies.cost import Prices

WINDOW = 4096
MODEL = "demo-model"
PRICES = Prices(3e-6, 3e-7, 3.75e-6)
COUNTER = WindowCounter("o200k_base", 1.0)


def _score(prompts: list[list[dict[str, Any]]], first_trim: int) -> tuple[float, float]:
    """(kept-prefix share after the first trim, estimated cost in dollars)."""
    kept, total, cost = 0, 0, 0.0
    previous: list[dict[str, Any]] | None = None
    for k, prompt in enumerate(prompts):
        tokens = COUNTER.prompt({"messages": prompt})
        is_prefix = previous is not None and prompt[: len(previous)] == previous
        cached = COUNTER.prompt({"messages": previous}) if is_prefix and previous else 0
        cost += PRICES.prompt(tokens, cached)
        if k > first_trim:
            total += 1
            kept += is_prefix
        previous = prompt
    return (kept / total if total else 1.0), cost


def _run(requests: list[list[dict[str, Any]]]) -> list[list[str]]:
    from litellm.utils import trim_messages

    app = create_upstream(window=WINDOW)
    with BackgroundServer(app) as upstream, tempfile.TemporaryDirectory() as data:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "models": {MODEL: {"context_window": WINDOW, "tokenizer": "o200k_base"}},
            "data_dir": data,
        }
        ours: list[list[dict[str, Any]]] = []
        theirs: list[list[dict[str, Any]]] = []
        first_trim = None
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0)
            for k, messages in enumerate(requests):
                raw = client.chat.completions.with_raw_response.create(
                    model=MODEL,
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=256,
                )
                ours.append(app.state.received[-1]["messages"])
                budget = int(raw.headers["x-contextwarden-budget"])
                if first_trim is None and raw.headers["x-contextwarden-actions"] != "none":
                    first_trim = k
                theirs.append(
                    trim_messages([dict(m) for m in messages], model="gpt-4o", max_tokens=budget)
                )
        calls = len(app.state.summaries)
        # The summaries' own prompts are billed too (uncached, at the input price).
        summarizing = sum(PRICES.prompt(COUNTER.prompt(r)) for r in app.state.summaries)
    start = first_trim if first_trim is not None else len(requests)
    rows = []
    for name, prompts, summaries, extra in (
        ("contextwarden", ours, calls, summarizing),
        ("litellm trim_messages", theirs, 0, 0.0),
        ("untrimmed (as if it fitted)", requests, 0, 0.0),
    ):
        share, cost = _score(prompts, start)
        rows.append([name, f"{share:.0%}", str(summaries), f"${cost + extra:.4f}"])
    base = _score(requests, start)[1]
    for row in rows:
        row.append(f"{float(row[3][1:]) / base:.2f}x")
    return rows


def economy_rows(quick: bool) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(7)
    rows = []
    for name, requests in (
        (f"chat, {30 if quick else 150} turns", chat(rng, 30 if quick else 150)),
        (f"agent loop, {20 if quick else 60} tool steps", agent(rng, 20 if quick else 60)),
        (
            f"long single task, {20 if quick else 100} tool steps",
            agent(rng, 20 if quick else 100, chime_in=False),
        ),
    ):
        for row in _run(requests):
            rows.append([name, *row])
    header = [
        "workload (4096-token window)",
        "trimmer",
        "prefix kept after first trim",
        "summarizer calls",
        "estimated prompt cost (summaries included)",
        "vs untrimmed",
    ]
    return header, rows
