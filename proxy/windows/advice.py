"""What a first run is told about a model whose window nothing states (in no table, not
configured, not learned yet): its requests go untrimmed, and there are three ways out. The
banner of ``serve`` says them once; the first refusal of such a model's request says them to
its client, inside the upstream's own error message, and to the log.
"""

from __future__ import annotations

from typing import Any

import orjson

CONFIGURE = 'configure its window: models: {"NAME": {context_window: N}} (or a family, "NAME-*")'
SERVER = (
    "let its server tell: discovery: auto on its upstream (the default; Ollama, llama.cpp, "
    "vLLM and LM Studio state their windows)"
)
ERRORS = (
    "let its errors teach it: an overflow error, with figures or without, is learned and "
    "retried smaller (GET /admin/learned-windows)"
)


# What the agent CLIs send before their first step, by the upstream's count: their
# instructions and tool definitions (measured in tests/clients: Claude Code 2.1's system
# prompt and tools, Codex's default model's tools item and developer messages). A window
# under one of these and a step's room leaves that client's session nothing to work in.
CLIENT_FRAMES = {"Claude Code": 18_600, "Codex": 11_700}
STEP_ROOM = 8_000  # a step (a command's output, a file read) and the reply to it


def frame_note(frame: int, window: int) -> str | None:
    """What a refusal adds when the client's own frame (its instructions and tool
    definitions, ``frame`` tokens) leaves less than a step's room in ``window``: the window
    it needs. None when the frame leaves that room, or is not what fills the window (under
    half of it: a pasted message too large for any such window is told nothing of frames)."""
    if window - frame >= STEP_ROOM or frame * 2 < window:
        return None
    return (
        f"; this client's instructions and tool definitions alone take {frame:,} tokens, "
        f"which leaves less than a step's room ({STEP_ROOM:,} tokens) in a {window:,}-token "
        f"window: it needs a model with a window of at least {frame + STEP_ROOM:,} tokens "
        "(the proxy never cuts them)"
    )


def small_window_lines(name: str, window: int) -> list[str]:
    """The banner's warnings for a configured model whose window is too small for an agent
    CLI's frame and a step: the window that client needs."""
    return [
        f"    {client}'s instructions and tools take about {frame:,} tokens: with {name} it "
        f"needs a window of at least {frame + STEP_ROOM:,} (its frame + {STEP_ROOM:,} for a step)"
        for client, frame in CLIENT_FRAMES.items()
        if window < frame + STEP_ROOM
    ]


def banner_lines() -> list[str]:
    """The banner's lines: what happens to a model in no table, and the ways out."""
    return [
        "  a model in no table and not configured (most local models, a provider's model newer "
        "than litellm's table) goes untrimmed until its window is known; three ways:",
        f"    {CONFIGURE}",
        f"    {SERVER}",
        f"    {ERRORS}",
        "  tell a client the window its model is fitted to: contextwarden client-setup "
        "claude|codex|agents --model M",
    ]


def refusal_note(model: str, upstream: str) -> str:
    """The sentence added to the first refusal of a model whose window was unknown."""
    return (
        f"[contextwarden: no context window is known for model {model!r}, so this request went "
        f"untrimmed. Configure it (models: {{{model!r}: {{context_window: N}}}}), let its "
        f"server state it (upstreams.{upstream}.discovery), or let its overflow errors teach it "
        "(each one is learned from)]"
    )


def annotated(body: bytes, note: str) -> bytes | None:
    """``body`` (an OpenAI or Anthropic JSON error) with ``note`` after its message; None when
    it is not such an error (it then goes as it came)."""
    try:
        payload: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    error["message"] = f"{error['message']} {note}"
    return orjson.dumps(payload)


class FirstRefusals:
    """The models whose first refusal has been told, in this process (a bounded set: past
    ``limit`` names nothing more is told)."""

    def __init__(self, limit: int = 4096) -> None:
        self._told: set[str] = set()
        self._limit = limit

    def first(self, model: str) -> bool:
        if model in self._told or len(self._told) >= self._limit:
            return False
        self._told.add(model)
        return True
