"""Which files are sessions, and which reader reads each: told from the file's first line,
whatever its name. A directory is searched for ``*.jsonl`` files; with no path at all, the
places the clients write to (``~/.claude/projects``, ``$CODEX_HOME/sessions`` or
``~/.codex/sessions``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from proxy.estimate import chat_jsonl, claude_code, codex
from proxy.estimate.jsonl import objects
from proxy.estimate.session import Session, TranscriptError

Reader = Callable[[Path], Session]
# In this order: a chat request body never has Claude Code's or Codex's markers.
READERS = (
    (codex.looks_like, codex.read),
    (claude_code.looks_like, claude_code.read),
    (chat_jsonl.looks_like, chat_jsonl.read),
)


def default_candidates() -> list[Path]:
    """Where the clients write their transcripts, whether or not they exist here."""
    home = Path.home()
    codex_home = Path(os.environ.get("CODEX_HOME") or home / ".codex")
    return [home / ".claude" / "projects", codex_home / "sessions"]


def default_places() -> list[Path]:
    return [p for p in default_candidates() if p.is_dir()]


def files(paths: Iterable[Path]) -> list[Path]:
    """The JSONL files of ``paths``: each file as given, each directory's, sorted."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        elif path.exists():
            out.append(path)
        else:
            raise TranscriptError(f"{path}: no such file or directory")
    return out


def reader_for(path: Path) -> Reader:
    first = next(objects(path), None)
    if first is None:
        raise TranscriptError(f"{path}: no JSON object on any line")
    for looks_like, read in READERS:
        if looks_like(first):
            return read
    raise TranscriptError(
        f"{path}: not a Claude Code transcript, a Codex rollout nor chat-completions JSONL"
    )


def sessions(paths: Iterable[Path]) -> tuple[list[Session], list[str]]:
    """The sessions of ``paths``, and why each file that is none was skipped."""
    found: list[Session] = []
    skipped: list[str] = []
    for path in files(paths):
        try:
            session = reader_for(path)(path)
        except TranscriptError as exc:
            skipped.append(str(exc))
            continue
        if session.requests:
            found.append(session)
        else:
            skipped.append(f"{path}: no request")
    return found, skipped
