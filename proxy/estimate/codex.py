"""Codex's rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Each line is a RolloutItem: ``{"type": ..., "payload": ...}`` with type ``session_meta`` (the
session's id and base instructions), ``turn_context`` (the model of the turns that follow),
``response_item`` (a Responses API item, as sent or as answered), ``compacted`` (a compaction:
``replacement_history`` is the history from then on) or ``event_msg`` (events, not sent).

The items Codex sends are the response items in order: its tools (an ``additional_tools``
item) and system prompt (``developer`` messages) among them, for its default model. Each
answer's items (reasoning, calls, the assistant's message) follow the request that asked for
them: each run of answer items marks one request, the items before it. Fields Codex keeps
for itself (``internal_*``) are not sent and are left out.

A model that takes top-level ``instructions`` (``-m gpt-5.1-codex``) is sent the session's base
instructions there, rebuilt so; its top-level tools are not in the rollout (prelude.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.estimate.jsonl import objects
from proxy.estimate.session import Session, TranscriptError

ANSWERS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
    }
)
UNSENT = frozenset({"ghost_snapshot"})


def looks_like(first: dict[str, Any]) -> bool:
    return first.get("type") == "session_meta" and isinstance(first.get("payload"), dict)


def read(path: Path) -> Session:
    session = Session(name=str(path), client="codex", fmt="responses", model=None)
    history: list[dict[str, Any]] = []
    instructions: str | None = None
    answering = False
    for line in objects(path):
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            base = payload.get("base_instructions")
            text = base.get("text") if isinstance(base, dict) else None
            instructions = text if isinstance(text, str) else None
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            session.model = payload["model"]
        elif kind == "compacted" and isinstance(payload.get("replacement_history"), list):
            history, answering = [_sent(i) for i in payload["replacement_history"]], False
        elif kind == "response_item" and payload.get("type") not in UNSENT:
            answer = _is_answer(payload)
            if answer and not answering and history:
                session.requests.append({"input": list(history)})
            answering = answer
            history.append(_sent(payload))
    if not session.requests:
        raise TranscriptError(f"{path}: no request in the rollout")
    if instructions and not any(i.get("role") == "developer" for i in history):
        for request in session.requests:
            request["instructions"] = instructions
    if not any(i.get("type") == "additional_tools" for i in history):
        session.notes.append("tools: not in the rollout")
        session.lacks_prelude = True
    return session


def _is_answer(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return kind in ANSWERS or (kind == "message" and item.get("role") == "assistant")


def _sent(item: Any) -> dict[str, Any]:
    """The item as Codex sends it: without the fields it keeps for itself."""
    if not isinstance(item, dict):
        return {"type": "message", "role": "user", "content": str(item)}
    return {k: v for k, v in item.items() if not k.startswith("internal_")}
