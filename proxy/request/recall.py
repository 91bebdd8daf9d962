"""Recall: cleared output comes back on demand.

Under a policy with ``recall: true``, the passes that clear or compact tool outputs name a
handle in each placeholder (strategies/outputs.py). When a plan forwards such placeholders, the
planner keeps the originals here (``RecallMemory``: in the checkpoint store under the
conversation's key, which names its caller, with the store's TTL, and in memory, a cache of
the store's within the memory budget's share) and offers the model one extra tool
(proxy/formats/recall.py).

When the model calls it, ``settle`` answers the call itself: it reads the upstream's answer
whole (a stream is buffered, then relayed chunk by chunk as it came), appends the call and the
original as the tool's result to the request, plans that continuation like any request (the
recalled text is fitted with the rest, capped at ``RECALLED_SHARE`` of the budget) and sends
it again. The client only ever sees an answer that makes no recall call: the final text or its
own tools' calls. At most ``max_recalls`` calls are answered per client request; past them
the tool is withdrawn, a further call is answered once with a note that the limit is reached,
and a model that still calls it gets the client a 502 (bounded: at most ``max_recalls`` + 1
continuations per client request).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from proxy.errors import Invariant, UpstreamUnavailable
from proxy.formats.recall import RECALL, Answer, answer_of, continued, scrubbed
from proxy.request.conversations import BlobStore, key_of
from proxy.stores.guarded import StoreFault
from proxy.upstreams.forwarding import Reply, decoded, is_event_stream
from strategies.bounded_memory import Lru
from strategies.messages import Message
from strategies.outputs import HANDLE, handle_for, output_text
from strategies.prompt_cut import cut_message_middle
from strategies.step_cut import cut_part
from strategies.tokens import Counter

if TYPE_CHECKING:
    from proxy.wire import WireRequest

STORE_PREFIX = "recall\t"
INDEX_PREFIX = "recall-index\t"
IN_MEMORY = 64 * 1024 * 1024  # bytes, until the memory budget gives its share
INDEX_SHARE = 8  # of that memory, one part for the indexes, the rest for the originals
ENTRY = 300  # an entry's key and slot, beside its text
MAX_INDEX = 1024  # calls indexed per conversation (the oldest go first)
MAX_ORIGINAL_BYTES = 4 << 20  # an output larger than this is not kept (nor recallable)
RECALLED_SHARE = 0.5  # of the continuation's budget, at most, for one recalled output
NAMED = re.compile(r"recall: (r(?:[0-9]{15}|[0-9a-f]{12}))\b")  # the forms of HANDLE
NOT_KEPT = (
    "No output is kept under the handle {handle} any longer (it expired, the store's size "
    "bounds let it go, or the handle is not one a placeholder names): run the tool again if "
    "you need its output."
)
LIMIT = (
    "The recall limit of this request is reached: answer with what you have, or run the tool "
    "again if you need its output."
)


class RecallMemory:
    """The originals of cleared, compacted or dropped outputs, by conversation and handle,
    with each conversation's index: which call (tool and arguments) each handle answered, so
    an output no longer shown at all can be recalled by what it was."""

    def __init__(
        self,
        store: BlobStore | None = None,
        ttl_seconds: float = 7 * 86400,
        shared: bool = False,
    ) -> None:
        """``shared``: other processes write the store too (its index of a conversation's
        calls may be newer than this process's)."""
        # Caches of the store's, in the memory budget's share (``resize``): the originals, and
        # each conversation's index of calls.
        self._recent: Lru[str, str] = Lru()
        self._index: Lru[str, dict[str, str]] = Lru()
        self.resize(IN_MEMORY)
        self._store = store
        self._ttl = ttl_seconds
        self._shared = shared
        self._writes: set[asyncio.Task[None]] = set()

    def resize(self, limit: int) -> None:
        self._index.resize(limit // INDEX_SHARE)
        self._recent.resize(limit - limit // INDEX_SHARE)

    @property
    def limit(self) -> int:
        return self._recent.limit + self._index.limit

    @property
    def held(self) -> int:
        return self._recent.held + self._index.held

    def __len__(self) -> int:
        return len(self._recent) + len(self._index)

    def keep(
        self, conversation: str, originals: dict[str, tuple[str, str]], owner: str = ""
    ) -> None:
        """Hold ``originals`` (handle -> (text, call)) now; write the new ones and the index
        to the store in the background (a recall in this request's answer finds them in
        memory), charged to ``owner`` (proxy/stores/quota.py: past its share, its oldest go,
        and a recall of one answers that it is no longer kept)."""
        new = []
        index = dict(self._index.get(conversation) or {})
        for handle, (text, call) in originals.items():
            key = f"{STORE_PREFIX}{conversation}\t{handle}"
            index.setdefault(handle, call)
            if self._recent.get(key) is not None:
                continue
            self._recent.put(key, text, _text_bytes(text))
            new.append((key, text.encode("utf-8", "surrogatepass"), self._ttl))
        while len(index) > MAX_INDEX:
            del index[next(iter(index))]
        size = ENTRY + sum(ENTRY + len(h) + len(c) for h, c in index.items())
        self._index.put(conversation, index, size)
        if new and self._store is not None:
            new.append((f"{INDEX_PREFIX}{conversation}", orjson.dumps(index), self._ttl))
            task = asyncio.ensure_future(self._write(self._store, new, owner))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def get(self, conversation: str, wanted: str) -> str | None:
        """The original under a handle, or, for anything else (a file name, a command), the
        newest one whose call names it."""
        handle = wanted.strip()
        if not HANDLE.fullmatch(handle):
            found = await self._find(conversation, handle)
            if found is None:
                return None
            handle = found
        key = f"{STORE_PREFIX}{conversation}\t{handle}"
        text = self._recent.get(key)
        if text is not None or self._store is None:
            return text
        raw = await self._read(key)
        return raw.decode("utf-8", "surrogatepass") if raw else None

    async def _find(self, conversation: str, query: str) -> str | None:
        index = self._index.get(conversation)
        if index is None or self._shared:  # the store's may name calls made elsewhere
            raw = await self._read(f"{INDEX_PREFIX}{conversation}")
            try:
                index = orjson.loads(raw) if raw else index or {}
            except orjson.JSONDecodeError:
                index = index or {}
        wanted = query.lower()
        if not wanted or not isinstance(index, dict):
            return None
        hits = [h for h, call in index.items() if isinstance(call, str) and wanted in call.lower()]
        return hits[-1] if hits else None

    async def _read(self, key: str) -> bytes | None:
        if self._store is None:
            return None
        try:
            return await self._store.get_blob(key)
        except StoreFault:  # the store is down: the model is told to run the tool again
            return None

    async def _write(
        self, store: BlobStore, items: list[tuple[str, bytes, float]], owner: str
    ) -> None:
        for key, value, ttl in items:
            try:
                await store.put_blob(key, value, ttl, owner)
            except StoreFault:  # kept in memory all the same
                return

    async def drain(self) -> None:
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)


def _text_bytes(text: str) -> int:
    """What a kept original holds: a str takes a byte a character when all are ASCII, up to
    four otherwise."""
    return ENTRY + len(text) * (1 if text.isascii() else 4)


def originals(sent: Sequence[Message], forwarded: Sequence[Message]) -> dict[str, tuple[str, str]]:
    """handle -> (original text, the call it answered), for each forwarded tool output whose
    text names a handle and differs from the output the client sent with the same call id,
    and for each output the client sent that is not forwarded at all (its step was dropped).
    For an output of the newest step cut to fit (strategies/step_cut.py), what its handle
    keeps is the part the cut left out: the model has its head, tail and error lines."""
    calls = _calls(sent)
    by_id = {m.get("tool_call_id"): m for m in sent if m.get("role") == "tool"}
    shown = set()
    out: dict[str, tuple[str, str]] = {}
    for m in forwarded:
        if m.get("role") != "tool":
            continue
        shown.add(m.get("tool_call_id"))
        text = output_text(m)
        found = NAMED.search(text.split("\n", 1)[0])
        original = by_id.get(m.get("tool_call_id"))
        if found is not None and original is not None and output_text(original) != text:
            _add(out, found.group(1), original, calls, cut_part(output_text(original), text))
    for call_id, original in by_id.items():
        if call_id not in shown and isinstance(call_id, str):
            _add(out, handle_for(original) or "", original, calls)
    return out


def _add(
    out: dict[str, tuple[str, str]],
    handle: str,
    original: Message,
    calls: dict[str, str],
    part: str | None = None,
) -> None:
    text = output_text(original) if part is None else part
    if handle and len(text.encode("utf-8", "surrogatepass")) <= MAX_ORIGINAL_BYTES:
        out[handle] = (text, calls.get(str(original.get("tool_call_id")), ""))


def _calls(messages: Sequence[Message]) -> dict[str, str]:
    """tool_call_id -> "name arguments" (whitespace runs as one space)."""
    out = {}
    for m in messages:
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                text = f"{fn.get('name', '')} {fn.get('arguments', '')}"
                out[str(call.get("id"))] = " ".join(text.split())
    return out


def recall_key(req: WireRequest) -> str:
    """Where a request's originals are kept and read: its conversation's, and for a caller
    without a credential (whom nothing tells from another such caller, who could name the
    same conversation) its own request's alone."""
    key = key_of(req)
    return f"{key}\t{req.alone}" if req.alone else key


def fitted(text: str, counter: Counter, limit: int) -> str:
    """A recalled original, its middle cut (with a marker) when it alone would take more than
    ``limit`` tokens."""
    message: Message = {"role": "tool", "content": text}
    if counter.message(message) <= limit:
        return text
    cut = cut_message_middle(message, limit, counter)
    return text if cut is None else str(cut["content"])


async def read_whole(reply: Reply) -> list[bytes]:
    """The reply's body as the chunks it came in (a stream is read to its end)."""
    if reply.body is not None:
        return [reply.body]
    if reply.stream is None:
        raise Invariant("a reply with neither a body nor a stream")
    return [chunk async for chunk in reply.stream]


async def replayed(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


@dataclass(kw_only=True, slots=True)
class Round:
    """What one continuation needs from the request path: build a request from a body, plan
    and send it (with the overflow retry); the conversation, counter and budget it belongs to."""

    build: Callable[[bytes, bool], Awaitable[Any]]  # (body, offer the tool) -> WireRequest
    send: Callable[[Any], Awaitable[tuple[Reply, Any]]]  # WireRequest -> (reply, plan)
    memory: RecallMemory
    conversation: str
    counter: Counter
    budget: int
    max_recalls: int
    # The recall tool's name, reserved for the client's request (formats/recall.py reserved).
    name: str = RECALL


async def settle(
    reply: Reply, fmt: Any, payload: dict[str, Any], rounds: Round
) -> tuple[Reply, int]:
    """The reply the client gets: ``reply`` when it makes no recall call, else the answer to
    the request continued with the recalled outputs (as often as the model recalls, up to
    ``max_recalls``); and how many recalls were answered."""
    used = after = 0
    while reply.status == 200:
        chunks = await read_whole(reply)
        streamed = reply.body is None
        raw = decoded(b"".join(chunks), reply.headers)
        answer = answer_of(fmt, raw, streamed and is_event_stream(reply.headers), rounds.name)
        if not answer.calls:
            _relay(reply, chunks, raw, streamed, rounds.name)
            break
        if used >= rounds.max_recalls:
            # Withdrawn, yet called (the model saw it in the turns before): told once that
            # the limit is reached; a model that still calls it gets a 502, never the call.
            after += 1
            if after > 1:
                raise UpstreamUnavailable("the model kept calling the withdrawn recall tool")
        results, used = await _answers(answer, rounds, used)
        payload = continued(fmt, payload, answer, results)
        req = await rounds.build(orjson.dumps(payload), used < rounds.max_recalls)
        reply, _ = await rounds.send(req)
    return reply, used


def _relay(reply: Reply, chunks: list[bytes], raw: bytes, streamed: bool, name: str) -> None:
    """The final answer, to the client: as it came, chunk by chunk, unless it echoes the
    recall tool (a Responses object echoes the request's tools): then without it (and
    uncompressed, when it came compressed)."""
    clean = scrubbed(raw, streamed, name)
    if clean is raw:
        if streamed:
            reply.stream = replayed(chunks)
        return
    reply.headers = [(k, v) for k, v in reply.headers if k.lower() != "content-encoding"]
    if streamed:
        reply.stream = replayed([clean])
    else:
        reply.body = clean


async def _answers(answer: Answer, rounds: Round, used: int) -> tuple[list[str], int]:
    out = []
    limit = int(rounds.budget * RECALLED_SHARE)
    for _, handle in answer.calls:
        if used >= rounds.max_recalls:
            out.append(LIMIT)
            continue
        used += 1
        text = await rounds.memory.get(rounds.conversation, handle)
        kept = NOT_KEPT.format(handle=handle) if text is None else None
        out.append(kept or fitted(text or "", rounds.counter, limit))
    return out, used
