"""Chat-completions JSONL: each line a request body (``model``, ``messages``: a log of what a
client sent, in order), or each line one message of a single conversation (``role``,
``content``: then each assistant message was asked for by the messages before it). A line of
neither shape among them is dropped, and said (its number)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.estimate.jsonl import numbered
from proxy.estimate.session import Session, TranscriptError


def looks_like(first: dict[str, Any]) -> bool:
    return isinstance(first.get("messages"), list) or isinstance(first.get("role"), str)


def read(path: Path) -> Session:
    lines = list(numbered(path))
    session = Session(name=str(path), client="chat", fmt="chat", model=None)
    good = [value for _, value in lines if value is not None]
    if good and isinstance(good[0].get("messages"), list):
        kept = [(n, v) for n, v in lines if v is not None and isinstance(v.get("messages"), list)]
        session.requests = [body for _, body in kept]
        models = [b["model"] for b in session.requests if isinstance(b.get("model"), str)]
        session.model = models[0] if models else None
        for body in session.requests:
            body.pop("stream", None)  # the replay answers nothing
        _dropped(session, lines, {n for n, _ in kept}, "request bodies")
        return session
    history: list[dict[str, Any]] = []
    messages = [(n, v) for n, v in lines if v is not None and isinstance(v.get("role"), str)]
    for _, message in messages:
        if message["role"] == "assistant" and history:
            session.requests.append({"messages": list(history)})
        history.append(message)
    if not session.requests:
        raise TranscriptError(f"{path}: neither request bodies nor a conversation's messages")
    _dropped(session, lines, {n for n, _ in messages}, "messages")
    return session


def _dropped(
    session: Session, lines: list[tuple[int, dict[str, Any] | None]], kept: set[int], shape: str
) -> None:
    """The lines not read, said (how many, which): a file of another's lines, or torn."""
    bad = [n for n, _ in lines if n not in kept]
    if not bad:
        return
    shown = ", ".join(str(n) for n in bad[:20]) + (", ..." if len(bad) > 20 else "")
    noun = "line" if len(bad) == 1 else "lines"
    said = f"{len(bad)} {noun} dropped, not JSON {shape} like the rest ({noun} {shown})"
    session.warnings.append(f"{session.name}: {said}")
