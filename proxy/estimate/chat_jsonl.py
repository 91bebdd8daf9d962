"""Chat-completions JSONL: each line a request body (``model``, ``messages``: a log of what a
client sent, in order), or each line one message of a single conversation (``role``,
``content``: then each assistant message was asked for by the messages before it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.estimate.jsonl import objects
from proxy.estimate.session import Session, TranscriptError


def looks_like(first: dict[str, Any]) -> bool:
    return isinstance(first.get("messages"), list) or isinstance(first.get("role"), str)


def read(path: Path) -> Session:
    lines = list(objects(path))
    session = Session(name=str(path), client="chat", fmt="chat", model=None)
    if lines and isinstance(lines[0].get("messages"), list):
        session.requests = [body for body in lines if isinstance(body.get("messages"), list)]
        models = [b["model"] for b in session.requests if isinstance(b.get("model"), str)]
        session.model = models[0] if models else None
        for body in session.requests:
            body.pop("stream", None)  # the replay answers nothing
        return session
    history: list[dict[str, Any]] = []
    for message in lines:
        if not isinstance(message.get("role"), str):
            continue
        if message["role"] == "assistant" and history:
            session.requests.append({"messages": list(history)})
        history.append(message)
    if not session.requests:
        raise TranscriptError(f"{path}: neither request bodies nor a conversation's messages")
    return session
