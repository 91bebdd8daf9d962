"""Views over OpenAI chat message dicts.

Messages stay plain ``dict`` objects exactly as the client sent them: the engine never copies or
re-serializes a message it does not change, so unknown fields survive untouched.

A *unit* is the smallest run of messages that may be removed on its own: an assistant message
with ``tool_calls`` together with every ``tool`` message answering it, an assistant message with
a legacy ``function_call`` together with the ``function`` message answering it, or any other
single message; after the leading system/developer messages, a unit also takes the *attached*
messages that follow it (any role but user, assistant, tool and function: Claude Code's
mid-conversation ``system`` reminders and instructions), which stand or fall with the step or
message they follow. A *turn* starts at a user message and runs to the next one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]

# A wire format's view message carries its wire items under SOURCE: the engine carries the key
# and never reads it. HIDDEN is the priced stand-in for what those items hold that the message
# does not show (see HiddenCounter in strategies/tokens.py).
SOURCE = "_src"
HIDDEN = "_hidden"

LEADING_ROLES = frozenset({"system", "developer"})
RESULT_ROLES = frozenset({"tool", "function"})  # what answers a call
# The roles of a conversation's own turns; any other role after the leading run is attached to
# the message before it (a mid-conversation instruction or reminder).
TURN_ROLES = frozenset({"user", "assistant", "tool", "function"})
# The same as a tuple: tested by equality, so a role of any JSON type (a list) is only unequal.
ANSWERING = ("tool", "function")


@dataclass(frozen=True, slots=True)
class Unit:
    """Half-open index range ``[start, end)`` of messages that stand or fall together."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


def role(message: Message) -> str:
    value = message.get("role")
    return value if isinstance(value, str) else ""


def tool_call_ids(message: Message) -> list[str]:
    """Ids of the tool calls an assistant message makes (empty for any other message)."""
    calls = message.get("tool_calls")
    if role(message) != "assistant" or not isinstance(calls, list):
        return []
    return [str(c.get("id")) for c in calls if isinstance(c, dict)]


def function_call(message: Message) -> dict[str, Any] | None:
    """The legacy ``function_call`` an assistant message makes, if any."""
    call = message.get("function_call")
    return call if role(message) == "assistant" and isinstance(call, dict) else None


def called_functions(message: Message) -> list[dict[str, Any]]:
    """The ``{name, arguments}`` of every call an assistant message makes, either format."""
    out: list[dict[str, Any]] = []
    calls = message.get("tool_calls") if role(message) == "assistant" else None
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out.append(fn)
    legacy = function_call(message)
    if legacy is not None:
        out.append(legacy)
    return out


def makes_calls(message: Message) -> bool:
    """An assistant message that calls a tool or a function, and so needs its results."""
    return bool(tool_call_ids(message)) or function_call(message) is not None


def result_role(message: Message) -> str | None:
    """The role of the messages that answer ``message``'s calls: tool, function, or None.
    (``tool_call_ids`` and ``function_call`` without their lists: the engine asks this of
    every message several times per fit.)"""
    if message.get("role") != "assistant":
        return None
    calls = message.get("tool_calls")
    if isinstance(calls, list) and any(isinstance(c, dict) for c in calls):
        return "tool"
    return "function" if isinstance(message.get("function_call"), dict) else None


def iter_text(message: Message) -> Iterator[str]:
    """Every text fragment of a message's content (string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


def leading_count(messages: Sequence[Message]) -> int:
    """How many system/developer messages open the conversation."""
    n = 0
    while n < len(messages) and role(messages[n]) in LEADING_ROLES:
        n += 1
    return n


def units(messages: Sequence[Message], start: int = 0, end: int | None = None) -> list[Unit]:
    """Split ``messages[start:end]`` into atomic units.

    An assistant message with tool calls absorbs the ``tool`` messages that follow it (in any
    order, possibly interleaved with nothing else); one with a ``function_call`` absorbs the
    ``function`` message after it. A result not preceded by its call is a unit of its own;
    removing it can never orphan anything. Past the leading system/developer run, a unit then
    absorbs the attached messages after it (see :func:`attached`).
    """
    stop = len(messages) if end is None else end
    lead = leading_count(messages)
    out: list[Unit] = []
    i = start
    while i < stop:
        j = i + 1
        answers = result_role(messages[i])
        if answers is not None:
            while j < stop and messages[j].get("role") == answers:
                j += 1
        if i >= lead:
            while j < stop and attached(messages[j]):
                j += 1
        out.append(Unit(i, j))
        i = j
    return out


def attached(message: Message) -> bool:
    """A message in a role other than the conversation's own turns (a mid-conversation
    ``system`` or ``developer`` message, or a role the proxy does not know): it belongs to the
    message before it."""
    return message.get("role") not in TURN_ROLES


def last_user_index(messages: Sequence[Message]) -> int:
    """Index of the last user message, or -1."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1
