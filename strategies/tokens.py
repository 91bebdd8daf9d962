"""Token counters.

A :class:`Counter` prices one message at a time plus a fixed per-request overhead, so that counts
can be cached per message and summed per block. :class:`ChatCounter` implements OpenAI's chat
accounting exactly where OpenAI documents it (3 tokens a message, +1 for ``name``, +3 priming the
reply) and errs on the side of more tokens where it does not (tool calls, unknown content parts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import orjson

from strategies.bounded_memory import DEFAULT_LIMIT, DigestMemo, Generations, exact, key_size
from strategies.budget import tools_tokens
from strategies.images import ImageCosts, image_tokens
from strategies.messages import HIDDEN, SOURCE, Message

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
# Not published by OpenAI; generous so that an assistant tool call is never under-counted.
TOKENS_PER_TOOL_CALL = 12
SHORT_KEY = 512
SHORT_TEXT = 8192
# A field value this short is counted once per counter: a role, a tool's name, a call id (a
# message's role alone made 841 of 2944 tokenizer calls over an agent's 135 requests), and
# what a Responses or Messages view message hides (its item's type and ids as JSON, 60-130
# characters), which every rewrite of the message (a cleared result) prices again: it halved
# the tokenizer calls of the compaction passes in those formats' fresh cuts (49 -> 24).
WORD = 256
WORDS_SHARE = 8  # of a counter's memory, one part for these, the rest for messages


class Counter(Protocol):
    """Prices messages in tokens. Implementations must be deterministic."""

    @property
    def priming(self) -> int:
        """Tokens added once per request (the reply priming)."""
        ...

    def message(self, message: Message) -> int:
        """Tokens of one message, including its per-message overhead."""
        ...

    def tools(self, tools: object, functions: object) -> int:
        """Tokens of the request's tool definitions."""
        ...


def count_messages(counter: Counter, messages: Sequence[Message]) -> int:
    """Tokens of ``messages`` alone, without the per-request priming."""
    return sum(counter.message(m) for m in messages)


def each_message(counter: Counter, messages: Sequence[Message]) -> list[int]:
    """The tokens of each message, including its per-message overhead."""
    return [counter.message(m) for m in messages]


def count_prompt(counter: Counter, messages: Sequence[Message]) -> int:
    """Tokens the messages of a request occupy, priming included."""
    return count_messages(counter, messages) + counter.priming


class ChatCounter:
    """OpenAI chat accounting over a text-length function, with a per-message count memory
    and one of short texts, together holding at most ``memory`` bytes (``resize``), the least
    recently used going first (strategies/bounded_memory.py).

    ``token_len`` is normally ``len(encoding.encode_ordinary(text))`` for a tiktoken encoding.
    """

    def __init__(
        self,
        token_len: Callable[[str], int],
        images: ImageCosts | None = None,
        memory: int = DEFAULT_LIMIT,
    ) -> None:
        self._token_len = token_len
        self._images = images or ImageCosts()
        # Dicts whose every operation is atomic under the GIL: counters can be shared by the
        # worker threads that fit large requests.
        self._cache: Generations[Hashable, int] = Generations(key_size)
        self._words: Generations[str, int] = Generations(key_size)
        self.resize(memory)
        self.priming = REPLY_PRIMING

    def resize(self, memory: int) -> None:
        self._words.resize(memory // WORDS_SHARE)
        self._cache.resize(memory - memory // WORDS_SHARE)

    @property
    def limit(self) -> int:
        return self._cache.limit + self._words.limit

    @property
    def held(self) -> int:
        return self._cache.held + self._words.held

    def __len__(self) -> int:
        return len(self._cache) + len(self._words)

    def text(self, text: str) -> int:
        if len(text) > WORD:
            return self._token_len(text)
        known = self._words.get(text)
        if known is None:
            known = self._token_len(text) if text else 0
            self._words.put(text, known)
        return known

    def message(self, message: Message) -> int:
        key = _digest(message)
        if key is None:
            return self._price(message)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        value = self._price(message)
        self._cache.put(exact(key) if type(key) is bytes else key, value)
        return value

    def tools(self, tools: object, functions: object) -> int:
        return tools_tokens(tools, functions, self.text)

    def _price(self, message: Message) -> int:
        n = TOKENS_PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            if key == "content":
                n += self._content(value)
            elif key == "tool_calls":
                n += self._tool_calls(value)
            elif key == "function_call" and isinstance(value, dict):
                n += self._call(value)
            elif key == "name":
                n += self._value(value) + TOKENS_PER_NAME
            else:
                n += self._value(value)
        return n

    def _value(self, value: Any) -> int:
        if isinstance(value, str):
            return self.text(value)
        return self.text(orjson.dumps(value).decode())

    def _content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.text(content)
        if not isinstance(content, list):
            return self._value(content)
        n = 0
        for part in content:
            n += self._part(part)
        return n

    def _part(self, part: Any) -> int:
        if not isinstance(part, dict):
            return self._value(part)
        kind = part.get("type")
        if kind == "text" or (kind is None and isinstance(part.get("text"), str)):
            return self.text(str(part.get("text", "")))
        if kind == "image_url":
            image = part.get("image_url")
            if isinstance(image, dict):
                return image_tokens(image.get("url"), image.get("detail"), self._images)
            return image_tokens(image, None, self._images)
        # Audio, files and unknown parts: charged by their JSON text, which over-counts.
        return self._value(part)

    def _tool_calls(self, calls: Any) -> int:
        if not isinstance(calls, list):
            return self._value(calls)
        return sum(self._call(c.get("function", c)) if isinstance(c, dict) else 0 for c in calls)

    def _call(self, fn: Any) -> int:
        if not isinstance(fn, dict):
            return self._value(fn) + TOKENS_PER_TOOL_CALL
        name = fn.get("name", "")
        args = fn.get("arguments", "")
        return self._value(name) + self._value(args) + TOKENS_PER_TOOL_CALL


class ScaledCounter:
    """A conservative estimate for models whose tokenizer we do not have.

    Prices with another counter and multiplies by ``ratio`` (rounded up), plus ``per_message``
    extra tokens for chat-template markers.
    """

    def __init__(self, inner: Counter, ratio: float, per_message: int = 2) -> None:
        self._inner = inner
        self._ratio = ratio
        self._per_message = per_message
        self.priming = math.ceil(inner.priming * ratio)

    def message(self, message: Message) -> int:
        return math.ceil(self._inner.message(message) * self._ratio) + self._per_message

    def tools(self, tools: object, functions: object) -> int:
        return math.ceil(self._inner.tools(tools, functions) * self._ratio)


def _digest(message: Message) -> Hashable | None:
    """The cache key of a message. A message of short strings only (most chat messages) is its
    own key, as a tuple of its items: exact, and far cheaper than serializing it. Others are
    keyed by their JSON when short, else by a 128-bit BLAKE2b of it."""
    size = 0
    for v in message.values():  # a loop: all() over a generator and sum() cost twice as much
        if type(v) is not str:
            break
        size += len(v)
    else:
        if size <= SHORT_TEXT:
            return tuple(message.items())
    try:
        raw = orjson.dumps(message)
    except TypeError:
        return None
    return raw if len(raw) <= SHORT_KEY else _DIGESTS.digest(raw)


_DIGESTS = DigestMemo()  # the messages an agent resends every step, hashed once


def digests() -> DigestMemo:
    """The memo of long messages' digests (their count's key), for the memory budget."""
    return _DIGESTS


class MemoCounter:
    """A counter remembering each message object it priced, for the length of one request:
    the engine prices the same objects several times (before, after each pass, per block), and
    even a cache hit costs a serialization. Never share one across requests."""

    def __init__(self, inner: Counter) -> None:
        self._inner = inner
        self._memo: dict[int, tuple[Message, int]] = {}
        self.priming = inner.priming

    def message(self, message: Message) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        value = self._inner.message(message)
        self._memo[id(message)] = (message, value)  # holding the object keeps its id unique
        return value

    @property
    def inner(self) -> Counter:
        """The counter it remembers for: for prices of throwaway messages (a cut's tries),
        which remembering would only hold in memory."""
        return self._inner

    def seed(self, message: Message, tokens: int) -> None:
        """``message`` costs ``tokens``, as this counter's inner one priced an equal message."""
        self._memo[id(message)] = (message, tokens)

    def seed_many(self, messages: Sequence[Message], counts: Sequence[int]) -> None:
        """``seed`` for each of ``messages`` with its count in ``counts``."""
        self._memo.update(zip(map(id, messages), zip(messages, counts, strict=True), strict=True))

    def tools(self, tools: object, functions: object) -> int:
        return self._inner.tools(tools, functions)


class HiddenCounter:
    """Prices a message as the model's counter prices its visible fields plus, as one more
    text field, what only its source items (under ``SOURCE``) hold, as ``hidden`` tells it.
    That field weighs ``hidden_weight`` times its tokens, and each message ``message_weight``
    more, when the calibration found the upstream counts them otherwise."""

    def __init__(
        self,
        inner: Counter,
        hidden: Callable[[Message], str] | None,
        hidden_weight: float = 1.0,
        message_weight: float = 0.0,
    ) -> None:
        self._inner = inner
        self._hidden = hidden
        self._weight = hidden_weight
        self._extra = round(message_weight)
        self.priming = inner.priming

    def message(self, message: Message) -> int:
        if SOURCE not in message or self._hidden is None:
            return self._inner.message(message) + self._extra
        shown = {k: v for k, v in message.items() if k != SOURCE}
        hidden = self._hidden(message)
        if self._weight != 1.0:
            tokens = self._inner.message(shown) + round(self._weight * self._tokens(hidden))
            return tokens + self._extra
        if hidden:
            shown[HIDDEN] = hidden
        return self._inner.message(shown) + self._extra

    def hidden_of(self, message: Message) -> int:
        """The tokens of what ``message`` hides (unweighted)."""
        if SOURCE not in message or self._hidden is None:
            return 0
        return self._tokens(self._hidden(message))

    def tools(self, tools: object, functions: object) -> int:
        return self._inner.tools(tools, functions)

    def _tokens(self, hidden: str) -> int:
        # As a field beside the shown ones: the inner counter's own caches serve it.
        if not hidden:
            return 0
        return self._inner.message({HIDDEN: hidden}) - self._inner.message({})


# tiktoken's regex engine panics (a Rust panic, a BaseException that no handler catches) on a
# whitespace run of about a million characters; a text that long is counted in pieces.
PIECE = 65536


def safe_encode(encode: Callable[[str], list[int]]) -> Callable[[str], list[int]]:
    """An ``encode_ordinary`` that survives tiktoken's panic: a text too long for its regex
    engine is encoded in ``PIECE``-character pieces, one after the other."""

    def ids(text: str) -> list[int]:
        if len(text) <= PIECE:
            return encode(text)
        try:
            return encode(text)
        except BaseException as exc:  # pyo3's PanicException is a BaseException
            if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
                raise
            return [t for i in range(0, len(text), PIECE) for t in encode(text[i : i + PIECE])]

    return ids


def token_len(encode: Callable[[str], list[int]]) -> Callable[[str], int]:
    """The token length of a text under ``encode`` (a tiktoken ``encode_ordinary``)."""
    safe = safe_encode(encode)

    def count(text: str) -> int:
        ids = safe(text)
        # Encoded in pieces: one token of margin a cut (a cut may split one in two).
        return len(ids) + (len(text) - 1) // PIECE if len(text) > PIECE else len(ids)

    return count
