"""Claude Code's transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

Each line is an entry: ``type`` user, assistant, attachment or system (and bookkeeping lines:
queue-operation, last-prompt, file-history-snapshot, summary), with ``uuid`` and
``parentUuid``; ``message`` holds the Anthropic message. One answer of the model is written as
one entry per content block, each with the answer's ``message.id``. The conversation is the
chain of parents from the newest entry (a rewound branch is not part of it); a
``compact_boundary`` system entry starts the history afresh (what Claude Code sent after its own
compaction). Each answer was asked for by one request: the conversation before it.

Entries of a subagent (``isSidechain``) are another conversation: in a file of its own they are
read as one; inside the main file they are left out.

What Claude Code sends and does not write down: the system prompt and the tool definitions
(see prelude.py). The context it puts before the first user turn (the date) is rebuilt from the
entry's timestamp; CLAUDE.md's content, which it adds there too, is not in the transcript. Of its
attachments, the agent and skill listings are sent as one ``system`` message in ``messages``,
and are rebuilt so; the others are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.estimate.jsonl import objects
from proxy.estimate.session import Session, TranscriptError

TURNS = frozenset({"user", "assistant", "attachment", "system"})
AGENTS = "Available agent types for the Agent tool:\n"
CONCURRENCY = (
    "\n\nWhen you launch multiple agents for independent work, send them in a single message "
    "with multiple tool uses so they run concurrently."
)
# The context Claude Code puts before the first user turn: the date (and CLAUDE.md's content,
# which no transcript holds: left out).
CONTEXT = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:"
    "\n# currentDate\nToday's date is {date}.\n\n      IMPORTANT: this context may or may not be "
    "relevant to your tasks. You should not respond to this context unless it is highly "
    "relevant to your task.\n</system-reminder>\n\n"
)
SKILLS = "The following skills are available for use with the Skill tool:\n\n"


def looks_like(first: dict[str, Any]) -> bool:
    """Whether a file whose first object is ``first`` is a Claude Code transcript."""
    return "sessionId" in first or first.get("type") in {"queue-operation", "summary"}


def read(path: Path) -> Session:
    entries = [e for e in objects(path) if e.get("type") in TURNS and e.get("uuid")]
    main = [e for e in entries if not e.get("isSidechain")]
    chain = _chain(main or entries)
    if not chain:
        raise TranscriptError(f"{path}: no user or assistant entries")
    session = Session(name=str(path), client="claude-code", fmt="anthropic", model=None)
    history: list[dict[str, Any]] = []
    answering: str | None = None  # the message id of the answer being written
    for entry in chain:
        if entry.get("subtype") == "compact_boundary":
            history, answering = [], None
            continue
        message = _message(entry)
        if message is None:
            continue
        if message["role"] == "assistant":
            mid = (entry.get("message") or {}).get("id")
            if mid is None or mid != answering:
                if history:
                    session.requests.append({"messages": [dict(m) for m in history]})
                answering = mid
                session.model = session.model or _model(entry)
        else:
            answering = None
            if not history and not session.requests and isinstance(entry.get("timestamp"), str):
                context = {"type": "text", "text": CONTEXT.format(date=entry["timestamp"][:10])}
                message["content"] = [context, *_blocks(message["content"])]
        _append(history, message)
    session.notes.append("system prompt and tools: not in the transcript")
    return session


def _chain(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries from the first to the newest, following parents (across a compaction's
    boundary, by its ``logicalParentUuid``)."""
    by_id = {e["uuid"]: e for e in entries}
    out: list[dict[str, Any]] = []
    node: dict[str, Any] | None = entries[-1] if entries else None
    seen: set[str] = set()
    while node is not None and node["uuid"] not in seen:
        seen.add(node["uuid"])
        out.append(node)
        parent = node.get("parentUuid") or node.get("logicalParentUuid")
        node = by_id.get(parent) if isinstance(parent, str) else None
    out.reverse()
    return out


def _message(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The API message an entry stands for, or None (an entry Claude Code does not send)."""
    kind = entry["type"]
    if kind == "attachment":
        return _listing(entry.get("attachment") or {})
    message = entry.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return None
    content = message.get("content")
    if not isinstance(content, str | list):
        return None
    return {"role": message.get("role", kind), "content": content}


def _listing(attachment: dict[str, Any]) -> dict[str, Any] | None:
    """The agent and skill listings, sent as one ``system`` message (as the pinned Claude Code
    renders them: tests/estimate compares them with what it sent)."""
    kind = attachment.get("type")
    if kind == "agent_listing_delta" and attachment.get("addedLines"):
        text = AGENTS + "\n".join(attachment["addedLines"])
        if attachment.get("showConcurrencyNote"):
            text += CONCURRENCY
        return {"role": "system", "content": text}
    if kind == "skill_listing" and isinstance(attachment.get("content"), str):
        return {"role": "system", "content": SKILLS + attachment["content"]}
    return None


def _model(entry: dict[str, Any]) -> str | None:
    model = (entry.get("message") or {}).get("model")
    return model if isinstance(model, str) and not model.startswith("<") else None


def _append(history: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """One answer's blocks are one message; so are consecutive user turns (the API takes
    turns that alternate, and Claude Code sends them so)."""
    last = history[-1] if history else None
    if last is None or last["role"] != message["role"]:
        history.append(message)
    elif message["role"] == "system":  # the listings: one message, a blank line between
        history[-1] = {"role": "system", "content": f"{last['content']}\n\n{message['content']}"}
    else:
        history[-1] = {**last, "content": _blocks(last["content"]) + _blocks(message["content"])}


def _blocks(content: str | list[Any]) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
