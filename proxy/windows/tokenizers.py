"""Builds token counters; tiktoken's files come from litellm's bundled copy, never the network."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import tiktoken

from proxy.config.environment import prepare_environment
from strategies.bounded_memory import DEFAULT_LIMIT
from strategies.encodings import encoding_for_model, image_costs_for_model
from strategies.images import ImageCosts
from strategies.tokens import ChatCounter, Counter, ScaledCounter, safe_encode, token_len

ESTIMATE_BASE = "cl100k_base"
_INEXACT = frozenset({"estimate", "bytes"})


@dataclass(kw_only=True, frozen=True, slots=True)
class Pricing:
    """A model's counter, whether it is exact, and the most tokens one byte of JSON can cost."""

    counter: Counter
    tokenizer: str
    exact: bool
    tokens_per_byte: float
    worst_image: int


class Tokenizers:
    """One counter per (tokenizer, image costs), shared by every model that uses it. Their
    memories of counts share ``memory`` bytes evenly (``resize``: the memory budget's
    "token counts", proxy/observe/memory.py)."""

    def __init__(self, estimate_ratio: float, memory: int = DEFAULT_LIMIT) -> None:
        self._estimate_ratio = estimate_ratio
        self._pricings: dict[tuple[str, ImageCosts], Pricing] = {}
        self._counters: list[ChatCounter] = []
        self._memory = memory

    def resize(self, limit: int) -> None:
        self._memory = limit
        for counter in self._counters:
            counter.resize(limit // len(self._counters))

    @property
    def limit(self) -> int:
        return self._memory

    @property
    def held(self) -> int:
        return sum(c.held for c in self._counters)

    def __len__(self) -> int:
        return sum(len(c) for c in self._counters)

    def for_model(self, model: str, override: str | None = None) -> Pricing:
        name = override or encoding_for_model(model) or "estimate"
        images = image_costs_for_model(model)
        key = (name, images)
        pricing = self._pricings.get(key)
        if pricing is None:
            ratio = self._estimate_ratio if name == "estimate" else 1.0
            worst = math.ceil(images.worst * ratio)
            pricing = Pricing(
                counter=self._build(name, images),
                tokenizer=name,
                exact=name not in _INEXACT,
                tokens_per_byte=ratio,
                worst_image=worst,
            )
            self._pricings[key] = pricing
        return pricing

    def _build(self, name: str, images: ImageCosts) -> Counter:
        if name == "bytes":
            # A byte-level BPE token is at least one byte: the strictest safe bound.
            return self._kept(ChatCounter(lambda text: len(text.encode()), images))
        if name == "estimate":
            base = self._kept(ChatCounter(text_tokens(ESTIMATE_BASE), images))
            return ScaledCounter(base, self._estimate_ratio)
        return self._kept(ChatCounter(text_tokens(name), images))

    def _kept(self, counter: ChatCounter) -> ChatCounter:
        self._counters.append(counter)
        self.resize(self._memory)
        return counter


def get_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding loaded from the bundled files (see :mod:`proxy.config.environment`)."""
    prepare_environment()
    return tiktoken.get_encoding(name)


def encoder(encoding_name: str) -> Callable[[str], list[int]]:
    """The bundled encoding's ``encode_ordinary``, safe on any text length."""
    return safe_encode(get_encoding(encoding_name).encode_ordinary)


def text_tokens(encoding_name: str) -> Callable[[str], int]:
    """The token length of a text under the bundled encoding."""
    return token_len(get_encoding(encoding_name).encode_ordinary)
