"""Attached messages: what a client puts between the turns of a conversation in a role of its
own (Claude Code's mid-conversation ``system`` messages). Each belongs to the message before it
and goes with it (strategies/messages.py: units); two things more happen to them, and only
when a conversation does not fit:

- **Repeated reminders keep only the newest** (``stale_reminders``): Claude Code repeats the
  same reminder every few steps ("The task tools haven't been used recently...", 49 of them by
  step 243); the older copies of one kind say nothing the newest does not.
- **Re-attached tool output is history** (``ReattachedClear``, a compaction pass): after its own
  compaction Claude Code re-attaches the files it had read as one ``system`` message of the
  calls and their results ("Called the Read tool with the following input: ...", "Result of
  calling the Read tool: ..."). Those are tool output, cleared like it: a placeholder that names
  what was there and its size, the same bytes in every later request.

Every other attached message (its instructions: the agent types, the skills) is kept byte for
byte while the message it follows is kept.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from strategies.messages import Message, attached, iter_text, leading_count
from strategies.tokens import Counter

KIND_CHARS = 160  # how much of a reminder's text names its kind
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
# Claude Code's own wording for a tool call and its result re-attached to the conversation.
REATTACHED = re.compile(
    r"^(?:Called the [\w.-]+ tool with the following input|Result of calling the [\w.-]+ tool)"
)
CLEARED = "[Re-attached tool output cleared to save context"
MIN_CHARS = 500  # smaller re-attachments cost less than their placeholder is worth


def kind(message: Message) -> str:
    """What a reminder says, without its figures: two reminders of one kind differ at most in
    their numbers (a count, a date, a line)."""
    text = " ".join(iter_text(message))[: KIND_CHARS * 2]
    return _SPACE.sub(" ", _DIGITS.sub("#", text)).strip()[:KIND_CHARS]


def stale_reminders(messages: Sequence[Message], keep: Collection[int] = ()) -> list[int]:
    """Indices of the attached messages a newer attached message of the same kind repeats
    (none among ``keep``, nor in the leading run), oldest first."""
    seen: set[str] = set()
    out: list[int] = []
    lead = leading_count(messages)
    for i in range(len(messages) - 1, lead - 1, -1):
        m = messages[i]
        if not attached(m) or reattached(m):
            continue
        k = kind(m)
        if k in seen and i not in keep:
            out.append(i)
        seen.add(k)
    return out[::-1]


def reattached(message: Message) -> bool:
    """An attached message that re-attaches tool calls and their output."""
    return any(REATTACHED.match(t) for t in iter_text(message))


@dataclass(frozen=True, slots=True)
class ReattachedClear:
    """Clear re-attached tool output (see the module docstring): every attached message that
    holds one, past the leading run, of at least ``min_chars`` characters."""

    min_chars: int = MIN_CHARS
    name = "reattached_clear"

    def apply(self, messages: Sequence[Message], counter: Counter) -> list[Message]:
        out = list(messages)
        lead = leading_count(messages)
        for i in range(lead, len(messages)):
            m = messages[i]
            if not attached(m) or not reattached(m):
                continue
            text = "\n".join(iter_text(m))
            if len(text) < self.min_chars or text.startswith(CLEARED):
                continue
            first = text.splitlines()[0][:120]
            out[i] = {**m, "content": f"{CLEARED}: {first} ..., {counter.message(m)} tokens.]"}
        return out
