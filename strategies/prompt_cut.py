"""Fitting a plain prompt (``/v1/completions``) to a token budget, at token boundaries; and
cutting the middle of one chat message (a running task's statement that alone takes too much).

    middle_out   keep the head and the tail, a marker where the middle was
    keep_tail    keep the end (the instruction or question is usually last), marker first
    reject       refuse: the caller answers context_length_exceeded

Pure: the caller gives the token ids and the marker's ids; the result is token ids. A text
prompt is encoded, cut and decoded by the caller (see :func:`cut_text`), which also re-counts,
since decoding at a cut and encoding again can merge tokens differently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from strategies.errors import BudgetExceeded
from strategies.messages import Message
from strategies.tokens import Counter

PromptCut = Literal["middle_out", "keep_tail", "reject"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Codec:
    """A model's tokenizer as a cut needs it: encode, decode, and how many of our tokens one
    of the model's is worth (above 1 for an estimate)."""

    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    ratio: float
    ids_are_the_models: bool  # token-id prompts can carry our marker

    @staticmethod
    def of(
        encode: Callable[[str], list[int]],
        decode_bytes: Callable[[list[int]], bytes],
        ratio: float = 1.0,
        ids_are_the_models: bool = True,
    ) -> Codec:
        """A codec over a byte-level BPE (a tiktoken encoding's ``encode_ordinary`` and
        ``decode_bytes``); a cut may split a character, whose pieces are dropped."""

        def decode(ids: list[int]) -> str:
            return decode_bytes(ids).decode("utf-8", "ignore")

        return Codec(
            encode=encode, decode=decode, ratio=ratio, ids_are_the_models=ids_are_the_models
        )


def _utf8(ids: list[int]) -> bytes:
    return bytes(ids)


def _bytes(text: str) -> list[int]:
    return list(text.encode())


BYTES = Codec.of(_bytes, _utf8, 1.0, False)  # one token a byte: the strictest safe bound
MARKER = "\n\n[... middle of the prompt removed to fit the context window ...]\n\n"


def cut_tokens(
    tokens: Sequence[int], limit: int, how: PromptCut, marker: Sequence[int]
) -> list[int]:
    """``tokens`` at most ``limit`` long, cut ``how``; unchanged when they fit."""
    if len(tokens) <= limit:
        return list(tokens)
    if how == "reject" or limit <= len(marker):
        raise BudgetExceeded(
            f"the prompt needs {len(tokens)} tokens but only {limit} are left",
            "prompt",
            len(tokens),
            limit,
        )
    room = limit - len(marker)
    if how == "keep_tail":
        return [*marker, *tokens[len(tokens) - room :]]
    head = room // 2
    return [*tokens[:head], *marker, *tokens[len(tokens) - (room - head) :]]


def cut_text(
    text: str,
    limit: int,
    how: PromptCut,
    encode: Callable[[str], list[int]],
    decode: Callable[[list[int]], str],
) -> tuple[str, int, int]:
    """``text`` cut to ``limit`` tokens of ``encode``: (text, tokens before, tokens after).
    The cut is re-counted and tightened until the re-encoded text fits."""
    tokens = encode(text)
    if len(tokens) <= limit:
        return text, len(tokens), len(tokens)
    marker = encode(MARKER)
    target = limit
    for _ in range(8):
        out = decode(cut_tokens(tokens, target, how, marker))
        after = len(encode(out))
        if after <= limit:
            return out, len(tokens), after
        target -= after - limit
    raise BudgetExceeded("the prompt could not be cut to fit", "prompt", len(tokens), limit)


TASK_MARKER = "\n\n[... {n} characters of this message removed to fit the context window ...]\n\n"


def cut_message_middle(message: Message, limit: int, counter: Counter) -> Message | None:
    """``message`` with the middle of its longest text cut (a marker in its place) so that the
    counter prices it at ``limit`` or less; None when even an empty text does not fit. The cut
    depends only on the message and ``limit``, so a repeated request repeats its bytes."""
    content = message.get("content")
    texts = (
        [(None, content)]
        if isinstance(content, str)
        else [
            (k, p["text"])
            for k, p in enumerate(content or [])
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
    )
    if not texts:
        return None
    where, text = max(texts, key=lambda t: len(t[1]))

    def with_text(new: str) -> Message:
        if where is None:
            return {**message, "content": new}
        parts = list(content)  # type: ignore[arg-type]
        parts[where] = {**parts[where], "text": new}
        return {**message, "content": parts}

    def cut(keep: int) -> Message:
        head = keep // 2
        gone = len(text) - keep
        return with_text(
            text[:head] + TASK_MARKER.format(n=gone) + text[len(text) - (keep - head) :]
        )

    if counter.message(cut(0)) > limit:
        return None
    low, high = 0, len(text)  # the most characters kept that fit: a binary search
    while low < high:
        mid = (low + high + 1) // 2
        if counter.message(cut(mid)) <= limit:
            low = mid
        else:
            high = mid - 1
    return cut(low)
