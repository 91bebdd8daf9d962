"""What the proxy remembers of each conversation between its requests: the fingerprint of the
last prompt forwarded (is the next one's prefix the same? that part is billed at the cached
price), and the messages its requests pinned.

A conversation's key is its caller's scope and team and the hash of its leading messages and first
message, as checkpoints key it.

**Prefix.** For each conversation the tracker keeps a fingerprint of the last prompt forwarded:
its message count, a rolling hash of its messages, and its token count. The next request of the
conversation is then ``kept`` (the previous prompt is its prefix: about that many tokens can come
from the provider's cache), ``broken`` (it is not: the provider re-reads, and bills, the whole
prompt) or ``new`` (no fingerprint, or one older than ``TTL_SECONDS``, past any provider's
cache). A request digests only the messages the comparison needs; its own fingerprint is
finished once its answer has gone (or by the next request, if that comes first). Fingerprints
live in memory and, with the TTL, in the checkpoint store, so that a restarted proxy knows its
last prompts. For prompts the proxy counted (near the limit: the fast path's small prompts stay
in memory) the store is read when memory has no fingerprint for the conversation, and written
in the background. A store fault only costs the comparison (the request reports ``new``).

A store ``shared`` with other processes (replicas on Redis, ``serve --workers``) is the truth:
the conversation's last prompt may have gone through another one. Then every request reads the
store and takes the newer of the store's fingerprint and memory's (a replica's own may be
several requests old), and writes its own at once, for its caller to flush before the answer
leaves (proxy/stores/writer.py): its next request may come to another replica.

**Pins.** ``x-contextwarden-pin-last: 1`` pins the newest user message. A client sends that
header once, with the message, so the proxy remembers the pinned message's digest for its
conversation (in memory, per process) and keeps pinning it in every later request. (Pins by
the policy's ``pin:`` rules and by a message's own marker need no memory: see proxy/edge/intake.py.)
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from proxy.stores.guarded import StoreFault
from proxy.wire import WireRequest
from strategies.bounded_memory import DigestMemo, Lru, ObjectMemo
from strategies.messages import SOURCE, Message, last_user_index

State = Literal["kept", "broken", "new"]
TTL_SECONDS = 3600.0  # the longest provider cache (Anthropic's 1-hour writes, OpenAI's hour)
# What a fingerprint holds in memory, about: its key, the object and its digest, the slot.
FINGERPRINT_BYTES = 600
FINGERPRINTS = 65536 * FINGERPRINT_BYTES  # until the memory budget gives its share
PIN_BYTES = 300  # a conversation's pins: its key, the set, a slot (and 80 bytes a digest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fingerprint:
    count: int
    digest: bytes
    tokens: int  # the forwarded prompt's
    sent: int  # the client's prompt's
    at: float


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A forwarded prompt: its ``messages``, their ``tokens``, and the tokens of the prompt
    the client sent (``sent``)."""

    messages: Sequence[Message]
    tokens: int
    sent: int = 0


@dataclass(frozen=True, slots=True)
class Seen:
    state: State
    previous_tokens: int = 0  # the previous forwarded prompt's tokens (0 when new)
    previous_sent: int = 0  # the previous prompt the client sent (0 when new)

    @property
    def cached_tokens(self) -> int:
        """The tokens the provider can serve from its cache: the previous prompt, when kept."""
        return self.previous_tokens if self.state == "kept" else 0


@dataclass(slots=True, kw_only=True)
class _Pending:
    """A forwarded prompt whose fingerprint is finished after its answer has gone: the
    rolling digest of its first messages (those the comparison needed), its other messages."""

    rolling: Any  # hashlib's blake2b, over the messages before ``rest``
    rest: Sequence[Message]
    count: int
    tokens: int
    sent: int
    at: float
    persist: bool
    owner: str  # whose share of the store it takes (proxy/stores/quota.py)


class BlobStore(Protocol):
    async def get_blob(self, key: str) -> bytes | None: ...

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        """``owner``: whose share of the store's bytes it takes (proxy/stores/quota.py)."""
        ...


class PrefixTracker:
    def __init__(
        self,
        store: BlobStore | None = None,
        clock: Callable[[], float] = time.time,
        shared: bool = False,
    ) -> None:
        # The last prompt of the most recent conversations (a cache of the store's when it is
        # shared), in the memory budget's share.
        self._last: Lru[str, Fingerprint | _Pending] = Lru(FINGERPRINTS)
        self._store = store
        self._clock = clock
        self.shared = shared  # other processes write the store too (see the module docstring)
        self._writes: set[asyncio.Task[None]] = set()
        self._pending: dict[str, _Pending] = {}
        # The event loop that finishes fingerprints, asked for once: on Python 3.11 each
        # asyncio.get_running_loop() is a getpid system call. (A pending fingerprint whose
        # call never runs is finished by the next request or by drain all the same.)
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def memory(self) -> Lru[str, Fingerprint | _Pending]:
        """What this process holds (proxy/observe/memory.py gives it its share)."""
        return self._last

    async def see(
        self, conversation: str, prompt: Forwarded, persist: bool = True, owner: str = ""
    ) -> Seen:
        """Compare the forwarded ``prompt`` with the conversation's last one, and remember it
        in its place (its store bytes ``owner``'s). With ``persist`` (the
        caller's choice for prompts near the limit, the only ones whose next request may be
        trimmed) the store is read when memory has nothing, and written; without it, the
        comparison is memory's alone, and a small request costs no store round trip."""
        messages, tokens, sent = prompt.messages, prompt.tokens, prompt.sent
        now = self._clock()
        persist = persist or self.shared
        previous = await self._previous(conversation, persist)
        self._last.pop(conversation)
        # Only the messages the comparison needs are digested now; the fingerprint is
        # finished once the answer has gone (``_finish``, scheduled), or when the
        # conversation's next request asks for it first: a new conversation's first request
        # digests nothing on its way.
        rolling = hashlib.blake2b(digest_size=16)
        upto = min(previous.count, len(messages)) if previous is not None else 0
        for m in messages[:upto]:
            rolling.update(_digest(m))
        at_previous = rolling.digest() if previous is not None else None
        pending = _Pending(
            rolling=rolling,
            rest=messages[upto:],
            count=len(messages),
            tokens=tokens,
            sent=sent,
            at=now,
            persist=persist,
            owner=owner,
        )
        # One that memory lets go while still pending is written all the same.
        self._last.put(conversation, pending, FINGERPRINT_BYTES)
        self._pending[conversation] = pending
        if self.shared:  # written now: the caller flushes it before the answer leaves
            self._finish(conversation, pending)
        else:
            loop = self._loop
            if loop is None or loop.is_closed():
                loop = self._loop = asyncio.get_running_loop()
            loop.call_soon(self._finish, conversation, pending)
        if previous is None or now - previous.at > TTL_SECONDS:
            return Seen("new")
        kept = 0 < previous.count <= len(messages) and at_previous == previous.digest
        state: State = "kept" if kept else "broken"
        return Seen(state, previous.tokens, previous.sent)

    def _finish(self, conversation: str, pending: _Pending) -> Fingerprint:
        """``pending``'s fingerprint, in memory in its place (unless a newer prompt of the
        conversation took it), and written to the store when it was to be. Finishing it again
        changes nothing."""
        if pending.rest:  # on a copy: a digest that fails leaves it to be finished again
            rolling = pending.rolling.copy()
            for m in pending.rest:
                rolling.update(_digest(m))
            pending.rolling, pending.rest = rolling, ()
        digest = pending.rolling.digest()
        f = Fingerprint(
            count=pending.count,
            digest=digest,
            tokens=pending.tokens,
            sent=pending.sent,
            at=pending.at,
        )
        if self._pending.get(conversation) is pending:
            del self._pending[conversation]
            if self._last.peek(conversation) is pending:
                self._last.put(conversation, f, FINGERPRINT_BYTES)
            if pending.persist:
                self._write(conversation, f, pending.owner)
        return f

    async def last(self, conversation: str) -> Fingerprint | None:
        """The conversation's last forwarded prompt, when fresh."""
        previous = await self._previous(conversation)
        if previous is None or self._clock() - previous.at > TTL_SECONDS:
            return None
        return previous

    async def _previous(self, conversation: str, ask_store: bool = True) -> Fingerprint | None:
        """The conversation's last prompt: memory's; the store's when memory has none, or
        (shared) the newer of the two."""
        pending = self._pending.get(conversation)  # the newest, even if memory let it go
        if pending is not None:
            return self._finish(conversation, pending)
        found = self._last.get(conversation)
        mine = self._finish(conversation, found) if isinstance(found, _Pending) else found
        if self._store is None or not ask_store or (mine is not None and not self.shared):
            return mine
        try:
            raw = await self._store.get_blob(STORE_PREFIX + conversation)
        except StoreFault:  # the store is down: memory's, if any
            return mine
        theirs = _decode(raw) if raw else None
        if theirs is None or (mine is not None and mine.at >= theirs.at):
            return mine
        return theirs

    async def drain(self) -> None:
        """Finish the fingerprints and wait for the background writes (at shutdown, before
        the store closes)."""
        for conversation, pending in list(self._pending.items()):
            self._finish(conversation, pending)
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    def _write(self, conversation: str, fingerprint: Fingerprint, owner: str) -> None:
        if self._store is None:
            return
        store = self._store
        raw = _encode(fingerprint)

        async def write() -> None:
            try:
                await store.put_blob(STORE_PREFIX + conversation, raw, TTL_SECONDS, owner)
            except StoreFault:  # kept in memory all the same
                return

        task = asyncio.ensure_future(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)


STORE_PREFIX = "prefix\t"
_LAYOUT = struct.Struct("<IQQd16s")


def _encode(f: Fingerprint) -> bytes:
    return _LAYOUT.pack(f.count, f.tokens, f.sent, f.at, f.digest)


def _decode(raw: bytes) -> Fingerprint | None:
    try:
        count, tokens, sent, at, digest = _LAYOUT.unpack(raw)
    except struct.error:
        return None
    return Fingerprint(count=count, digest=digest, tokens=tokens, sent=sent, at=at)


def extends(previous: Fingerprint, messages: Sequence[Message]) -> bool:
    """Whether ``messages`` keep the prompt ``previous`` fingerprints as their prefix."""
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
    """A message's digest as the provider renders it, wherever its ``cache_control``
    breakpoints sit and whether its text is a string or one text block: Claude Code and the
    anthropic SDK move their one message breakpoint to the newest message on every request,
    and send that message's text as a block while it carries the marker and as a string after
    (the same prompt, the same cached prefix). The wire items behind a view message are not
    digested: what they hold that the message does not show (ids, signatures, encrypted
    reasoning) never changes in a conversation's earlier messages. Per message of every
    request: a message object seen before (one the request shares with its conversation's last,
    proxy/formats/reused_items.py) is found by its identity, else the common case is one dump of the
    shown fields."""
    same = _BY_OBJECT.get(message)
    if same is not None:
        return same
    shown = {k: v for k, v in message.items() if k != SOURCE} if SOURCE in message else message
    content = shown.get("content")
    if isinstance(content, list) and len(content) == 1:
        text = _one_text(content[0])
        if text is not None:
            shown = {**shown, "content": text}
    raw = orjson.dumps(shown)
    digest = _DIGESTS.get(raw)
    if digest is None:
        marked = orjson.dumps(unmarked(shown)) if b'"cache_control"' in raw else raw
        digest = hashlib.blake2b(marked, digest_size=16).digest()
        _DIGESTS.remember(raw, digest)
    _BY_OBJECT.remember(message, digest, len(raw))
    return digest


# Every request digests each of its messages, and an agent resends the same ones every step.
_DIGESTS = DigestMemo()
_BY_OBJECT = ObjectMemo()


def memories() -> tuple[DigestMemo, ObjectMemo]:
    """The message digests' memos, for the memory budget (proxy/observe/memory.py)."""
    return _DIGESTS, _BY_OBJECT


def _one_text(block: object) -> str | None:
    """The text of a text block (a breakpoint on it aside), else None."""
    if not isinstance(block, dict) or block.get("type") != "text":
        return None
    if set(block) - {"type", "text", "cache_control"}:
        return None
    text = block.get("text")
    return text if isinstance(text, str) else None


def unmarked(value: object) -> object:
    """``value`` with every ``cache_control`` breakpoint taken out, at any depth."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


_digest = message_digest


class PinMemory:
    """The pinned messages of the most recent conversations, per process (a cache: a pin
    the client sent once to another replica, or that memory let go, is not known here)."""

    def __init__(self) -> None:
        self._pins: Lru[str, set[bytes]] = Lru(FINGERPRINTS)

    @property
    def memory(self) -> Lru[str, set[bytes]]:
        return self._pins

    def pinned(
        self, conversation: str, messages: Sequence[Message], pin_last: bool
    ) -> frozenset[int]:
        """Ids of ``messages`` pinned by this request's header or an earlier one's."""
        remembered = self._pins.get(conversation)
        if pin_last:
            last = last_user_index(messages)
            if last >= 0:
                remembered = set(remembered or ()) | {message_digest(messages[last])}
                self._pins.put(conversation, remembered, PIN_BYTES + 80 * len(remembered))
        if not remembered:
            return frozenset()
        return frozenset(
            id(m) for m in messages if m.get("role") == "user" and message_digest(m) in remembered
        )


def key_of(req: WireRequest) -> str:
    """A request's conversation key: the one build_request set, else made from its view."""
    return req.conversation or conversation_key(req.scope, req.team, req.view.messages)
