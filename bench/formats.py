"""``python -m bench.formats``: parsing, viewing and digesting an agent's requests, per request,
in process, afresh against reusing the conversation's last request's items
(proxy/formats/reused_items.py), in the three formats, on the same conversation
(bench/agent_sized.py: one tool loop from about 5k to 10k tokens). Best of five passes, so
that other tenants of a shared machine weigh less; both columns are measured in the same run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from bench import agent_sized
from proxy.config.environment import prepare_environment
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.base import WireFormat
from proxy.formats.chat import CHAT
from proxy.formats.responses import RESPONSES
from proxy.formats.reused_items import RecentItems
from proxy.request.conversations import message_digest

FORMATS: tuple[tuple[str, WireFormat, Callable[[agent_sized.Messages], bytes]], ...] = (
    ("chat", CHAT, agent_sized.chat_body),
    ("responses", RESPONSES, agent_sized.responses_body),
    ("anthropic", ANTHROPIC, agent_sized.messages_body),
)


def per_request(fmt: WireFormat, name: str, bodies: list[bytes], reuse: bool) -> float:
    """Seconds per request to parse, view and digest each of ``bodies`` in turn."""
    recent = RecentItems()
    started = time.perf_counter()
    for body in bodies:
        memory = recent.begin(name) if reuse else None
        view = fmt.view(fmt.parse(body, memory), memory)
        if memory is not None:
            memory.commit(len(body))
        for message in view.messages:
            message_digest(message)
    return (time.perf_counter() - started) / len(bodies)


def format_rows(quick: bool = False) -> tuple[list[str], list[list[str]]]:
    prepare_environment()
    conversation = agent_sized.steps(1000)
    rounds = 2 if quick else 5
    header = ["format", "requests", "afresh", "reusing the last request's items", "ratio"]
    rows = []
    for name, fmt, write in FORMATS:
        bodies = [write(m) for m in conversation]
        afresh = min(per_request(fmt, name, bodies, False) for _ in range(rounds))
        reused = min(per_request(fmt, name, bodies, True) for _ in range(rounds))
        rows.append(
            [
                name,
                str(len(bodies)),
                f"{afresh * 1e6:.0f} us",
                f"{reused * 1e6:.0f} us",
                f"{afresh / reused:.1f}x faster",
            ]
        )
    return header, rows


if __name__ == "__main__":
    head, body = format_rows("--quick" in sys.argv)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    for row in [head, ["-" * w for w in widths], *body]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
