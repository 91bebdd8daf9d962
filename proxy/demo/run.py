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

from proxy.config.settings import load_settings
from proxy.demo.clients import CLAUDE, MODEL, converse_anthropic, converse_chat, converse_responses
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from proxy.edge.app import create_app

APIS = ["chat_completions", "responses", "messages"]


def run_demo(turns: int, window: int, fmt: str = "chat") -> int:
    upstream_app = create_upstream(window=window)
    with BackgroundServer(upstream_app) as upstream, tempfile.TemporaryDirectory() as data:
        config: dict[str, Any] = {
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
                converse_responses(proxy.url, received, turns)
            elif fmt == "anthropic":
                converse_anthropic(proxy.url, received, turns)
            else:
                converse_chat(proxy.url, received, turns)
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
