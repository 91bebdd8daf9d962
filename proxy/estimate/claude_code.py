"""Claude Code's transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

Each line is an entry: ``type`` user, assistant, attachment or system (and bookkeeping lines:
queue-operation, last-prompt, file-history-snapshot, summary), with ``uuid`` and
``parentUuid``; ``message`` holds the Anthropic message. One answer of the model is written as
one entry per content block, each with the answer's ``message.id``. The conversation is the
chain of parents from the newest entry (a rewound branch is not part of it); a
``compact_boundary`` system entry starts the history afresh from the summary, followed by the
messages the boundary says it preserved (what Claude Code sent after its own compaction). Each
answer was asked for by one request: the conversation before it.

An answer Claude Code made itself (model ``<synthetic>``: "No response requested.") asked for
no request, and is sent with the history after it; one that stands for an API error
(``isApiErrorMessage``) is not sent, but the request it answers was.

Entries of a subagent (``isSidechain``) are another conversation: in a file of its own they are
read as one; inside the main file they are left out.

What Claude Code sends and does not write down: the system prompt and the tool definitions
(see prelude.py). The context it puts before the first user turn (the date) is rebuilt from the
entry's timestamp; CLAUDE.md's content, which it adds there too, is not in the transcript. Of its
attachments, the agent and skill listings (one ``system`` message in ``messages``) and an
empty task reminder are rebuilt as sent; the others are left out.
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
# A task reminder with no task, as sent (one that lists tasks is left out).
TASKS = (
    "The task tools haven't been used recently. If you're working on tasks that would benefit "
    "from tracking progress, consider using TaskCreate to add new tasks and TaskUpdate to update "
    "task status (set to in_progress when starting, completed when done). Also consider "
    "cleaning up the task list if it has become stale. Only use these if relevant to the "
    "current work. This is just a gentle reminder - ignore if not applicable.\n"
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
    rebuild = _Rebuild(session, {e["uuid"]: e for e in entries})
    for entry in chain:
        rebuild.see(entry)
    session.notes.append("system prompt and tools: not in the transcript")
    session.lacks_prelude = True
    return session


class _Rebuild:
    """The conversation as Claude Code sent it, entry by entry: each answer's request is the
    history before it."""

    def __init__(self, session: Session, by_id: dict[str, dict[str, Any]]) -> None:
        self.session, self.by_id = session, by_id
        self.history: list[dict[str, Any]] = []
        self.answering: str | None = None  # the message id of the answer being written
        self.fresh = True  # the next user turn is the first: the context goes before it
        # After a compaction: the entry the summary is (its anchor), and the entries kept
        # after it (Claude Code's preserved segment: the last answer).
        self.anchor: str | None = None
        self.preserved: list[str] = []

    def see(self, entry: dict[str, Any]) -> None:
        if entry.get("subtype") == "compact_boundary":
            self._compacted(entry)
            return
        message = _message(entry)
        if message is None:
            return
        if entry.get("isApiErrorMessage"):  # a request that failed: sent, its answer is not
            if self.history and self.answering != "error":
                self._request()
            self.answering = "error"
            return
        if message["role"] == "assistant" and not _synthetic(entry):
            mid = (entry.get("message") or {}).get("id")
            if mid is None or mid != self.answering:
                if self.history:
                    self._request()
                self.answering = mid
                self.session.model = self.session.model or _model(entry)
        elif message["role"] == "user":
            self.answering = None
            if self.fresh and isinstance(entry.get("timestamp"), str):
                context = {"type": "text", "text": CONTEXT.format(date=entry["timestamp"][:10])}
                message["content"] = [context, *_blocks(message["content"])]
            self.fresh = False
        _append(self.history, message)
        if entry["uuid"] == self.anchor:
            for uid in self.preserved:
                kept = _message(self.by_id.get(uid) or {"type": "-"})
                if kept is not None:
                    _append(self.history, kept)

    def _request(self) -> None:
        self.session.requests.append({"messages": [dict(m) for m in self.history]})

    def _compacted(self, boundary: dict[str, Any]) -> None:
        """Claude Code's own compaction: the history starts afresh from its summary."""
        self.history, self.answering, self.fresh = [], None, True
        kept = (boundary.get("compactMetadata") or {}).get("preservedMessages") or {}
        self.anchor = kept.get("anchorUuid")
        uuids = kept.get("uuids")
        self.preserved = [u for u in uuids if isinstance(u, str)] if isinstance(uuids, list) else []


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
    """The agent and skill listings, sent as one ``system`` message, and an empty task
    reminder (as the pinned Claude Code renders them: tests/estimate compares them with what
    it sent)."""
    kind = attachment.get("type")
    if kind == "agent_listing_delta" and attachment.get("addedLines"):
        text = AGENTS + "\n".join(attachment["addedLines"])
        if attachment.get("showConcurrencyNote"):
            text += CONCURRENCY
        return {"role": "system", "content": text}
    if kind == "skill_listing" and isinstance(attachment.get("content"), str):
        return {"role": "system", "content": SKILLS + attachment["content"]}
    if kind == "task_reminder" and attachment.get("itemCount") == 0:
        return {"role": "system", "content": TASKS}
    return None


def _synthetic(entry: dict[str, Any]) -> bool:
    model = (entry.get("message") or {}).get("model")
    return isinstance(model, str) and model.startswith("<")


def _model(entry: dict[str, Any]) -> str | None:
    model = (entry.get("message") or {}).get("model")
    return model if isinstance(model, str) and not model.startswith("<") else None


def _append(history: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """One answer's blocks are one message; so are consecutive user turns (the API takes
    turns that alternate), across the listings between them, which stay after them (as
    Claude Code sends them)."""
    last = history[-1] if history else None
    role = message["role"]
    between = last is not None and last["role"] == "system" and len(history) > 1
    if role == "user" and between and history[-2]["role"] == "user":
        history[-2] = _merged(history[-2], message)
        return
    if last is None or last["role"] != role:
        history.append(message)
    elif role == "system":  # the listings: one message, a blank line between
        history[-1] = {"role": "system", "content": f"{last['content']}\n\n{message['content']}"}
    else:
        history[-1] = _merged(last, message)


def _merged(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    """Two turns of one role as one: a user's texts end with a line break where another
    follows them."""
    blocks = _blocks(first["content"])
    if first["role"] == "user" and blocks and blocks[-1].get("type") == "text":
        blocks[-1] = {**blocks[-1], "text": blocks[-1]["text"] + "\n"}
    return {**first, "content": blocks + _blocks(then["content"])}


def _blocks(content: str | list[Any]) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
