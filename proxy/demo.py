"""``contextwarden demo``: see the proxy work with no provider account.

Starts the demo upstream (a small context window, enforced the way OpenAI does), the proxy in
front of it, and drives a growing conversation through the real ``openai`` SDK, printing per
turn what the client sent, what the proxy forwarded and what it trimmed.
"""

from __future__ import annotations

import tempfile
from typing import Any

import openai

from proxy.app import create_app
from proxy.config import load_settings
from proxy.demo_upstream import create_upstream
from proxy.servers import BackgroundServer

MODEL = "demo-model"
FILLER = (
    "Tell me more about context windows, token budgets and how a proxy keeps a long "
    "conversation inside them without losing the system prompt. "
)


def run_demo(turns: int, window: int) -> int:
    upstream_app = create_upstream(window=window)
    with BackgroundServer(upstream_app) as upstream, tempfile.TemporaryDirectory() as data:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "default_upstream": "demo",
            "models": {MODEL: {"context_window": window, "max_output_tokens": 256}},
            "data_dir": data,
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="demo", max_retries=0)
            print(f"demo upstream window: {window} tokens; proxy at {proxy.url}/v1\n")
            print(f"{'turn':>4} {'sent':>5} {'fwd':>4} {'tokens':>13} {'budget':>6}  actions")
            _converse(client, upstream_app.state.received, turns)
            print(f"summarizer calls: {len(upstream_app.state.summaries)} for {turns} requests")
    return 0


def _converse(client: openai.OpenAI, received: list[dict[str, Any]], turns: int) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You are a concise assistant. Never forget this line."}
    ]
    for turn in range(1, turns + 1):
        messages.append({"role": "user", "content": f"Turn {turn}. {FILLER * 2}"})
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=messages,
            max_tokens=128,
        )
        answer = raw.parse().choices[0].message.content or ""
        h = raw.headers
        forwarded = received[-1]["messages"]
        # A request that fits by the byte bound is not tokenized: its count is an upper bound.
        bound = "≤" if h["x-contextwarden-count"] == "bound" else ""
        before, after = h["x-contextwarden-tokens-before"], h["x-contextwarden-tokens-after"]
        tokens = f"{bound}{before}->{bound}{after}"
        print(
            f"{turn:>4} {len(messages):>5} {len(forwarded):>4} {tokens:>13} "
            f"{h['x-contextwarden-budget']:>6}  {h['x-contextwarden-actions']}"
            + (
                f" (checkpoint {h['x-contextwarden-checkpoint']})"
                if "x-contextwarden-checkpoint" in h
                else ""
            )
        )
        messages.append({"role": "assistant", "content": answer})
    print("\nsent: messages the client sent; fwd: messages the upstream received;")
    print("≤: an upper bound from the body's size (a request that clearly fits is not counted).")
