"""Builds token counters; tiktoken's files come from litellm's bundled copy, never the network."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import tiktoken

from proxy.config.environment import prepare_environment
from strategies.encodings import encoding_for_model, image_costs_for_model
from strategies.images import ImageCosts
from strategies.tokens import ChatCounter, Counter, ScaledCounter

ESTIMATE_BASE = "cl100k_base"
_INEXACT = frozenset({"estimate", "bytes"})


@dataclass(frozen=True, slots=True)
class Pricing:
    """A model's counter, whether it is exact, and the most tokens one byte of JSON can cost."""

    counter: Counter
    tokenizer: str
    exact: bool
    tokens_per_byte: float
    worst_image: int


class Tokenizers:
    """One counter per (tokenizer, image costs), shared by every model that uses it."""

    def __init__(self, estimate_ratio: float) -> None:
        self._estimate_ratio = estimate_ratio
        self._pricings: dict[tuple[str, ImageCosts], Pricing] = {}

    def for_model(self, model: str, override: str | None = None) -> Pricing:
        name = override or encoding_for_model(model) or "estimate"
        images = image_costs_for_model(model)
        key = (name, images)
        pricing = self._pricings.get(key)
        if pricing is None:
            ratio = self._estimate_ratio if name == "estimate" else 1.0
            worst = math.ceil(images.worst * ratio)
            pricing = Pricing(self._build(name, images), name, name not in _INEXACT, ratio, worst)
            self._pricings[key] = pricing
        return pricing

    def _build(self, name: str, images: ImageCosts) -> Counter:
        if name == "bytes":
            # A byte-level BPE token is at least one byte: the strictest safe bound.
            return ChatCounter(lambda text: len(text.encode()), images)
        if name == "estimate":
            base = ChatCounter(token_len(ESTIMATE_BASE), images)
            return ScaledCounter(base, self._estimate_ratio)
        return ChatCounter(token_len(name), images)


def get_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding loaded from the bundled files (see :mod:`proxy.config.environment`)."""
    prepare_environment()
    return tiktoken.get_encoding(name)


# tiktoken's regex engine panics (a Rust panic, a BaseException that no handler catches) on a
# whitespace run of about a million characters; a text that long is counted in pieces.
PIECE = 65536


def safe_encode(encoding_name: str) -> Callable[[str], list[int]]:
    """``encode_ordinary`` that survives tiktoken's panic: a text too long for its regex engine
    is encoded in ``PIECE``-character pieces, one after the other."""
    encode = get_encoding(encoding_name).encode_ordinary

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


def token_len(encoding_name: str) -> Callable[[str], int]:
    encode = safe_encode(encoding_name)

    def count(text: str) -> int:
        ids = encode(text)
        # Encoded in pieces: one token of margin a cut (a cut may split one in two).
        return len(ids) + (len(text) - 1) // PIECE if len(text) > PIECE else len(ids)

    return count
