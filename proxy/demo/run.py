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

from proxy import create_app, load_settings
from proxy.demo.clients import CLAUDE, MODEL, converse_anthropic, converse_chat, converse_responses
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream

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
        app = create_app(load_settings(None, **config))
        with BackgroundServer(app) as proxy:

            def settle() -> None:  # the background summaries finish between turns
                proxy.call(app.state.runtime.compactor.drain)

            print(f"demo upstream window: {window} tokens; proxy at {proxy.url}/v1 ({fmt})\n")
            print(f"{'turn':>4} {'sent':>5} {'fwd':>4} {'tokens':>13} {'budget':>6}  actions")
            received = upstream_app.state.received
            if fmt == "responses":
                converse_responses(proxy.url, received, turns, settle)
            elif fmt == "anthropic":
                converse_anthropic(proxy.url, received, turns, settle)
            else:
                converse_chat(proxy.url, received, turns, settle)
            calls = len(upstream_app.state.summaries)
            made = app.state.runtime.compactor.stats.created
            print(f"summarizer calls: {calls} for {turns} turns; checkpoints made: {made}")
            if calls:
                print(
                    "  a checkpoint folds the older turns that no longer fit into a summary, made\n"
                    "  as the conversation nears its budget (in the background when it can) and\n"
                    "  reused by the requests after it at no cost; a history too long for one\n"
                    "  summarizer call takes several. The larger a turn beside the window (an\n"
                    "  agent turn holds a call, its output and an answer), the more often:\n"
                    "  --window spaces them out."
                )
    return 0
