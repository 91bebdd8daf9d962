"""What a wire format gives the one engine, and takes back from it.

An adapter (a :class:`WireFormat`) does three things:

    parse   the body, validated in the format's own terms (BadRequest names what is wrong)
    view    the conversation as the engine's chat-shaped messages: the atomic units, roles and
            tiers (a call with its output; a turn's reasoning or thinking inside its assistant
            message), text for summaries and light trim, and token costs
    write   the kept messages back into the client's own format

Every trimming decision (policies, tiers, strategies, passes, checkpoints, cache-friendly cuts,
the overflow retry) is the engine's and the request path's, once, for every format.

A view message made from wire items carries them under ``SOURCE``. The engine never reads that
key: a message it keeps untouched is the same object, so its items go back as they came; one it
rewrote (a pass, a strategy) is a copy that still names its items, with the shown fields
changed; one with no source is new (a summary) and the adapter renders it. The view's counter
prices what the message shows plus, as text from the adapter's ``hidden``, everything it does
not (reasoning, signatures, ids): an upper bound on what the upstream counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from strategies.messages import Message
from strategies.tokens import Counter

SOURCE = "_src"  # a view message's wire items (never forwarded, never priced by the engine)
HIDDEN = "_hidden"  # the priced stand-in for what the items hold that the message does not show


@dataclass(slots=True)
class View:
    """A request's conversation as the engine sees it."""

    messages: list[Message]
    atomic_current: bool = False  # the running turn is kept whole and never rewritten
    items: int = 0  # wire items behind the messages (the byte bound's per-item overhead)
    hidden: Callable[[Message], str] | None = None  # the text of what a message's items hide

    def counter(self, inner: Counter) -> Counter:
        """The model's counter over this view: what a message shows plus what it hides."""
        return inner if self.hidden is None else ViewCounter(inner, self.hidden)


class ViewCounter:
    """Prices a view message as the model's counter prices its visible fields plus, as one
    more text field, what only its source items hold."""

    def __init__(self, inner: Counter, hidden: Callable[[Message], str]) -> None:
        self._inner = inner
        self._hidden = hidden
        self.priming = inner.priming

    def message(self, message: Message) -> int:
        if SOURCE not in message:
            return self._inner.message(message)
        shown = {k: v for k, v in message.items() if k != SOURCE}
        hidden = self._hidden(message)
        if hidden:
            shown[HIDDEN] = hidden
        return self._inner.message(shown)

    def tools(self, tools: object, functions: object) -> int:
        return self._inner.tools(tools, functions)


class WireFormat(Protocol):
    name: str  # "chat", "responses", "anthropic": the metrics label and the log's field
    api: str  # what an upstream declares it serves (``apis:``)
    path: str  # the upstream's path for it, under the base URL
    messages_param: str  # the body field an error about the conversation names

    def parse(self, body: bytes) -> dict[str, Any]: ...

    def view(self, payload: dict[str, Any]) -> View: ...

    def requested_output(self, payload: dict[str, Any]) -> int | None:
        """The request's own reply limit, the reply reserve when set."""
        ...

    def stateful(self, payload: dict[str, Any]) -> bool:
        """Whether the server holds history the proxy cannot see."""
        ...

    def write(self, payload: dict[str, Any], view: View, kept: list[Message]) -> dict[str, Any]:
        """The payload to forward with ``kept`` (the engine's output) as its conversation."""
        ...

    def prompt_usage(self, usage: dict[str, Any]) -> int | None:
        """The prompt tokens the upstream says it counted, from an answer's ``usage``."""
        ...


def usage_int(usage: dict[str, Any], *keys: str) -> int | None:
    """The sum of ``keys`` in ``usage`` (absent ones count 0), None when the first is missing."""
    values = [usage.get(k) for k in keys]
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in values):
        return None
    first = values[0]
    if not isinstance(first, int):
        return None
    total = sum(v for v in values if isinstance(v, int))
    return total if total > 0 else None


def source(message: Message) -> Any:
    return message.get(SOURCE)
