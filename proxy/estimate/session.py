"""A past session, as its requests: the conversation each request carried, rebuilt from what the
client wrote down, in the request's own wire format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Client = Literal["claude-code", "codex", "chat"]


@dataclass(kw_only=True)
class Session:
    """One session's requests, in order. ``requests`` hold the conversation field
    (``messages`` or ``input``) and what else the transcript states of each request;
    ``prelude.py`` adds what it does not (system prompt, tools) before they are planned."""

    name: str  # the file, and the session id where the file holds more than one
    client: Client
    fmt: Literal["anthropic", "responses", "chat"]
    model: str | None  # the model the transcript names (None: it names none)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # What the transcript left out of every request, in words (the report says it).
    notes: list[str] = field(default_factory=list)
    # Whether the system prompt or tools the client sent are missing (prelude.py adds them).
    lacks_prelude: bool = False
    # What the reader dropped that the user should hear of (printed on stderr).
    warnings: list[str] = field(default_factory=list)


class TranscriptError(ValueError):
    """A file that is not a transcript the readers know, with the reason."""
