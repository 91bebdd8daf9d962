"""Know the prefix: does a forwarded prompt keep the previous one of its conversation as its
prefix, the part providers bill at the cached price?

For each conversation (the scope, and the hash of its leading messages and first message, as
checkpoints key it) the tracker keeps a fingerprint of the last prompt forwarded: its message
count, a rolling hash of its messages, and its token count. The next request of the conversation
is then ``kept`` (the previous prompt is its prefix: about that many tokens can come from the
provider's cache), ``broken`` (it is not: the provider re-reads, and bills, the whole prompt) or
``new`` (no fingerprint, or one older than ``TTL_SECONDS``, past any provider's cache). Kept in
memory per process: a fingerprint is cheap to lose (the next request reports ``new``).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from strategies.messages import Message

State = Literal["kept", "broken", "new"]
TTL_SECONDS = 3600.0  # the longest provider cache (Anthropic's 1-hour writes, OpenAI's hour)
MAX_CONVERSATIONS = 65536


@dataclass(frozen=True, slots=True)
class Fingerprint:
    count: int
    digest: bytes
    tokens: int  # the forwarded prompt's
    sent: int  # the client's prompt's
    at: float


@dataclass(frozen=True, slots=True)
class Seen:
    state: State
    previous_tokens: int = 0  # the previous forwarded prompt's tokens (0 when new)
    previous_sent: int = 0  # the previous prompt the client sent (0 when new)

    @property
    def cached_tokens(self) -> int:
        """The tokens the provider can serve from its cache: the previous prompt, when kept."""
        return self.previous_tokens if self.state == "kept" else 0


class PrefixTracker:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._last: OrderedDict[str, Fingerprint] = OrderedDict()
        self._clock = clock

    def see(
        self, conversation: str, messages: Sequence[Message], tokens: int, sent: int = 0
    ) -> Seen:
        """Compare ``messages`` (the forwarded prompt, of ``tokens``; the client sent ``sent``)
        with the conversation's last one, and remember it in its place."""
        now = self._clock()
        previous = self._last.pop(conversation, None)
        rolling = hashlib.blake2b(digest_size=16)
        at_previous: bytes | None = None
        for i, m in enumerate(messages):
            rolling.update(_digest(m))
            if previous is not None and i + 1 == previous.count:
                at_previous = rolling.digest()
        self._last[conversation] = Fingerprint(len(messages), rolling.digest(), tokens, sent, now)
        if len(self._last) > MAX_CONVERSATIONS:
            self._last.popitem(last=False)
        if previous is None or now - previous.at > TTL_SECONDS:
            return Seen("new")
        state: State = "kept" if at_previous == previous.digest else "broken"
        return Seen(state, previous.tokens, previous.sent)

    def keeps(self, conversation: str, messages: Sequence[Message]) -> bool | None:
        """Whether ``messages`` keep the conversation's last prompt as their prefix, without
        remembering them; None when there is no fresh last prompt."""
        previous = self._last.get(conversation)
        if previous is None or self._clock() - previous.at > TTL_SECONDS:
            return None
        if len(messages) < previous.count:
            return False
        rolling = hashlib.blake2b(digest_size=16)
        for m in messages[: previous.count]:
            rolling.update(_digest(m))
        return rolling.digest() == previous.digest


def conversation_key(scope: str, team: str, messages: Sequence[Message]) -> str:
    """A conversation's key: its caller's scope and team, its leading messages and first one."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{scope}\0{team}\0".encode())
    for m in messages:
        h.update(_digest(m))
        if m.get("role") not in ("system", "developer"):
            break
    return h.hexdigest()


def message_digest(message: Message) -> bytes:
    return hashlib.blake2b(orjson.dumps(message), digest_size=16).digest()


_digest = message_digest
