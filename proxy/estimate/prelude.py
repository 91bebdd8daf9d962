"""What a transcript leaves out of each request, put back: the system prompt and tool
definitions (Claude Code writes neither down; Codex writes its default model's down as items),
and the options that shape the budget (Claude Code asks for 64,000 reply tokens).

Given a **template** (a request body the client sent: the proxy's log with content, or one
captured once), every field of it but the conversation goes with each rebuilt request: the
figures are then the proxy's own. Without one, the left-out part is an **estimate** of its
size: a system text of ``overhead`` tokens by the model's own counter, so that the budget, the
cuts and the prices see a prefix of that size (its words differ, its count does not). The
default sizes are the pinned clients' own, measured through the proxy (tests/estimate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.estimate.session import Client, Session

# The prompt tokens of a whole body, as the proxy counts them (tools included).
Measure = Callable[[dict[str, Any]], int]

# What the pinned clients send beside the conversation and do not write down, by the proxy's
# count: Claude Code 2.1.197's system prompt and 24 tools (tests/estimate/test_estimate.py
# measures it on the bodies it sent: 18,719 to 18,727, its session id and date aside). Codex
# writes its default model's down; another model's top-level tools are not measured (0: give
# --overhead or --template).
OVERHEAD: dict[Client, int] = {"claude-code": 18_727, "codex": 0, "chat": 0}
# The options the clients send with every request that the budget reads.
OPTIONS: dict[Client, dict[str, Any]] = {
    "claude-code": {"max_tokens": 64_000, "thinking": {"type": "adaptive"}},
    "codex": {},
    "chat": {},
}
CONVERSATION = {"anthropic": "messages", "chat": "messages", "responses": "input"}
FILLER = "context "


@dataclass(kw_only=True)
class Prelude:
    """What goes with each request: a template's fields, by format; else, for a session whose
    transcript lacks them, ``overhead`` tokens (None: the client's default size)."""

    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    overhead: int | None = None

    def complete(self, session: Session, model: str, measure: Measure) -> list[dict[str, Any]]:
        """Each of ``session``'s requests as a whole body for ``model`` (``measure``: how the
        proxy counts a body, which the estimate's filler is made to)."""
        template = self.templates.get(session.fmt)
        if template is not None:
            key = CONVERSATION[session.fmt]
            fixed = {k: v for k, v in template.items() if k not in (key, "stream")}
            return [{**fixed, **r, "model": model} for r in session.requests]
        options = OPTIONS[session.client]
        size = OVERHEAD[session.client] if self.overhead is None else self.overhead
        size = size if session.lacks_prelude else 0
        if session.fmt == "anthropic" and "max_tokens" not in options:
            options = {**options, "max_tokens": 4096}  # the API requires one
        bodies = [{**options, **r, "model": model} for r in session.requests]
        if size <= 0:
            return bodies
        text = filler(
            size, lambda t: measure(_with(session.fmt, bodies[0], t)) - measure(bodies[0])
        )
        return [_with(session.fmt, b, text) for b in bodies]


def _with(fmt: str, body: dict[str, Any], text: str) -> dict[str, Any]:
    if fmt == "anthropic":
        return {**body, "system": text}
    if fmt == "responses":
        return {**body, "instructions": text}
    return {**body, "messages": [{"role": "system", "content": text}, *body["messages"]]}


def filler(tokens: int, adds: Callable[[str], int]) -> str:
    """A text that ``adds`` about ``tokens`` tokens to a body's count."""
    probe = 1000
    per = adds(FILLER * probe) / probe
    return FILLER * max(1, round(tokens / max(per, 1e-6)))
