"""Pinned messages: what a request asks to keep verbatim, and what earlier requests of its
conversation asked.

A message is pinned by the policy's ``pin:`` rules (the engine matches them), by its own
``"contextwarden": {"pin": true}`` marker (stripped before forwarding; the client resends it
with the conversation), or by ``x-contextwarden-pin-last: 1``, which pins the newest user
message. A client sends that header once, with the message, so the proxy remembers the pinned
message's digest for its conversation (in memory, per process, like the prefix fingerprints)
and keeps pinning it in every later request.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from proxy.formats.base import SOURCE
from proxy.prefix import MAX_CONVERSATIONS, message_digest
from strategies.messages import Message, last_user_index


class PinMemory:
    def __init__(self) -> None:
        self._pins: OrderedDict[str, set[bytes]] = OrderedDict()

    def pinned(
        self, conversation: str, messages: Sequence[Message], pin_last: bool
    ) -> frozenset[int]:
        """Ids of ``messages`` pinned by this request's header or an earlier one's."""
        remembered = self._pins.get(conversation)
        if pin_last:
            last = last_user_index(messages)
            if last >= 0:
                if remembered is None:
                    remembered = self._pins[conversation] = set()
                remembered.add(message_digest(messages[last]))
                if len(self._pins) > MAX_CONVERSATIONS:
                    self._pins.popitem(last=False)
        if not remembered:
            return frozenset()
        self._pins.move_to_end(conversation)
        return frozenset(
            id(m) for m in messages if m.get("role") == "user" and message_digest(m) in remembered
        )


def marked(messages: Sequence[Message], objects: frozenset[int]) -> frozenset[int]:
    """Ids of the view messages made from the wire messages or items in ``objects`` (by id):
    the message itself (chat), or one of its source items (Responses, Anthropic)."""
    if not objects:
        return frozenset()
    out = set()
    for m in messages:
        if id(m) in objects or any(id(o) in objects for o in _sources(m)):
            out.add(id(m))
    return frozenset(out)


def _sources(m: Message) -> list[object]:
    src = m.get(SOURCE)
    if isinstance(src, list):
        return list(src)
    if isinstance(src, dict):
        return [src.get("m")]
    return []
