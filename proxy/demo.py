"""``contextwarden demo``: see the proxy work with no provider account.

Starts the demo upstream (a small context window, enforced the way OpenAI and Anthropic do), the
proxy in front of it, and drives a growing conversation through a real SDK, printing per turn
what the client sent, what the proxy forwarded and what it trimmed. ``--format`` picks the wire
format: chat completions, Responses (a Codex-style stateless tool loop with reasoning items) or
Anthropic Messages (a Claude-Code-style tool loop with thinking).
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


CLAUDE = "claude-demo"
APIS = ["chat_completions", "responses", "messages"]


def run_demo(turns: int, window: int, fmt: str = "chat") -> int:
    upstream_app = create_upstream(window=window)
    with BackgroundServer(upstream_app) as upstream, tempfile.TemporaryDirectory() as data:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1", "apis": APIS}},
            "default_upstream": "demo",
            "models": {
                MODEL: {
                    "context_window": window,
                    "max_output_tokens": 256,
                    "tokenizer": "o200k_base",
                },
                CLAUDE: {"context_window": window, "tokenizer": "estimate"},
            },
            "data_dir": data,
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            print(f"demo upstream window: {window} tokens; proxy at {proxy.url}/v1 ({fmt})\n")
            print(f"{'turn':>4} {'sent':>5} {'fwd':>4} {'tokens':>13} {'budget':>6}  actions")
            received = upstream_app.state.received
            if fmt == "responses":
                from proxy.demo_clients import converse_responses

                converse_responses(proxy.url, received, turns)
            elif fmt == "anthropic":
                from proxy.demo_clients import converse_anthropic

                converse_anthropic(proxy.url, received, turns)
            else:
                client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="demo", max_retries=0)
                _converse(client, received, turns)
            calls = len(upstream_app.state.summaries)
            print(f"summarizer calls: {calls} for {turns} turns")
            if calls:
                print(
                    "  each call creates a checkpoint: the older turns that no longer fit are\n"
                    f"  folded into it ('reused' costs none); here one every {turns / calls:.1f}"
                    " turns.\n  The larger a turn beside the window (an agent turn holds a call,"
                    " its output\n  and an answer), the more often; --window spaces them out."
                )
    return 0


def report(turn: int, sent: int, forwarded: int, h: Any) -> None:
    """One turn's line, from the proxy's x-contextwarden-* headers."""
    # A request that fits by the byte bound is not tokenized: its count is an upper bound.
    bound = "≤" if h["x-contextwarden-count"] == "bound" else ""
    before, after = h["x-contextwarden-tokens-before"], h["x-contextwarden-tokens-after"]
    tokens = f"{bound}{before}->{bound}{after}"
    checkpoint = h.get("x-contextwarden-checkpoint")
    print(
        f"{turn:>4} {sent:>5} {forwarded:>4} {tokens:>13} "
        f"{h['x-contextwarden-budget']:>6}  {h['x-contextwarden-actions']}"
        + (f" (checkpoint {checkpoint})" if checkpoint else "")
    )


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
        report(turn, len(messages), len(received[-1]["messages"]), raw.headers)
        messages.append({"role": "assistant", "content": answer})
    print("\nsent: messages the client sent; fwd: messages the upstream received;")
    print("≤: an upper bound from the body's size (a request that clearly fits is not counted).")
