"""Summarizer economy: calls per conversation growth, through the real proxy and demo upstream.

Four workloads at a 4096-token window, each with summaries on: a 40-turn chat of about 350
tokens a turn, a 30-step agent tool loop where the user chimes in every ten steps, one long
task of 60 tool steps with no user message after the first, and 30 one-off requests of
conversations the proxy has never seen. The figure that matters is calls per 40% of the
budget grown (target: under 1), counting every call (chunks and split turns included); calls
per 100k tokens of growth follow.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from typing import Any

import openai

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import WindowCounter, create_upstream

WINDOW = 4096
MODEL = "demo-model"
# Between one answer and the next request, an agent runs its tools and a user reads and types:
# seconds, in which the summaries the proxy prepares in the background are made. The demo
# upstream answers at once, so without this pause a request may overtake the preparation its
# predecessor started and the count depends on the machine's timing (1 to 5 calls on one
# workload, in runs of the same tree).
THINK_SECONDS = 0.05
COUNTER = WindowCounter("o200k_base", 1.0)


def _words(rng: random.Random, n: int) -> str:
    vocab = ("plan", "file", "test", "build", "change", "error", "fix", "review", "deploy")
    return " ".join(rng.choice(vocab) for _ in range(n))


def chat(rng: random.Random, turns: int) -> list[list[dict[str, Any]]]:
    """The request of each turn of a chat that grows by about 350 tokens a turn."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant."}]
    out = []
    for i in range(turns):
        msgs.append({"role": "user", "content": f"Turn {i}: {_words(rng, 130)}"})
        out.append(list(msgs))
        msgs.append({"role": "assistant", "content": f"Answer {i}: {_words(rng, 200)}"})
    return out


def agent(rng: random.Random, steps: int, chime_in: bool = True) -> list[list[dict[str, Any]]]:
    """An agent's requests: one user task, then tool calls and results of about 300 tokens;
    with ``chime_in`` the user adds a word every ten steps, else it is one long task (the
    normal agent case: no user message after the first)."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Task: {_words(rng, 60)}"},
    ]
    out = [list(msgs)]
    for i in range(steps):
        args = f'{{"path": "src/m{i}.py"}}'
        fn = {"name": "read_file", "arguments": args}
        call = {"id": f"call_{i}", "type": "function", "function": fn}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": _words(rng, 280)})
        if chime_in and i % 10 == 9:  # the user chimes in now and then
            msgs.append({"role": "assistant", "content": _words(rng, 40)})
            msgs.append({"role": "user", "content": f"Also: {_words(rng, 30)}"})
        out.append(list(msgs))
    return out


def one_offs(rng: random.Random, n: int) -> list[list[list[dict[str, Any]]]]:
    """``n`` conversations the proxy never saw, each sent once, at 1.2x to 2x the window."""
    return [[chat(rng, rng.randint(14, 24))[-1]] for _ in range(n)]


def _run(conversations: list[list[list[dict[str, Any]]]]) -> dict[str, float]:
    app = create_upstream(window=WINDOW)
    with BackgroundServer(app) as upstream, tempfile.TemporaryDirectory() as data:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "models": {MODEL: {"context_window": WINDOW, "tokenizer": "o200k_base"}},
            "data_dir": data,
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0)
            growth, budget, requests, dropped = 0, 0, 0, 0
            for conversation in conversations:
                had_checkpoint = False
                for messages in conversation:
                    raw = client.chat.completions.with_raw_response.create(
                        model=MODEL,
                        messages=messages,  # type: ignore[arg-type]
                        max_tokens=256,
                    )
                    budget = int(raw.headers["x-contextwarden-budget"])
                    checkpoint = raw.headers.get("x-contextwarden-checkpoint")
                    dropped += had_checkpoint and checkpoint is None
                    had_checkpoint = had_checkpoint or checkpoint is not None
                    requests += 1
                    time.sleep(THINK_SECONDS)
                growth += COUNTER.prompt({"messages": conversation[-1]}) - (
                    COUNTER.prompt({"messages": conversation[0]}) if len(conversation) > 1 else 0
                )
            calls = settled(lambda: len(app.state.summaries))
    return {
        "calls": calls,
        "growth": growth,
        "budget": budget,
        "requests": requests,
        "dropped": dropped,
    }


def settled(count: Callable[[], int], quiet: float = 1.0, limit: float = 15.0) -> int:
    """``count`` once it has not moved for ``quiet`` seconds: a summary the last requests
    started in the background is counted whether or not it had finished when they returned
    (before, the same run gave 0 or 1 by the race)."""
    deadline = time.monotonic() + limit
    last, since = count(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.1)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
    return last


def summary_rows(quick: bool) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(5)
    workloads = [
        ("chat, 40 turns of ~350 tokens", [chat(rng, 12 if quick else 40)]),
        ("agent loop, 30 tool steps", [agent(rng, 10 if quick else 30)]),
        ("long single task, 60 tool steps", [agent(rng, 15 if quick else 60, chime_in=False)]),
        ("one-off requests, never seen", one_offs(rng, 3 if quick else 30)),
    ]
    rows = []
    for name, conversations in workloads:
        r = _run(conversations)
        per_40 = r["calls"] / max(1e-9, r["growth"] / (0.4 * r["budget"]))
        rows.append(
            [
                name,
                f"{r['requests']:.0f}",
                f"{r['growth']:.0f}",
                f"{r['calls']:.0f}",
                f"{r['calls'] * 100_000 / max(1, r['growth']):.1f}",
                f"{per_40:.2f}",
                f"{r['dropped']:.0f}",
            ]
        )
    header = [
        "workload (4096-token window)",
        "requests",
        "tokens grown",
        "summarizer calls",
        "calls per 100k grown",
        "calls per 40% of budget grown",
        "requests that lost their checkpoint",
    ]
    return header, rows
