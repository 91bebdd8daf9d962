"""What a prompt costs, with the provider's prompt cache.

Providers bill the part of a prompt they read from their cache at a fraction of the input price
(OpenAI half to a tenth, Anthropic a tenth) and, where they charge for it, the part they write
to the cache at a premium (Anthropic's 5-minute writes: 1.25x). A prompt of ``tokens`` whose
first ``cached`` tokens are a cache hit costs::

    cached * cache_read + (tokens - cached) * (cache_write, else input)

Three figures per request make trimming's economics visible: the prompt **as sent** (the
client's, untrimmed, as if the window allowed it; an append-only client keeps its own prefix, so
its previous prompt is cached), **as forwarded** (its cached part is the previous forwarded
prompt when that is still the prefix), and forwarded **unbroken** (as if the previous forwarded
prompt had stayed the prefix). ``sent - forwarded`` is what trimming saved; ``forwarded -
unbroken`` what cache breaks cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Prices:
    """Dollars per prompt token."""

    input: float
    cache_read: float | None = None
    cache_write: float | None = None

    def prompt(self, tokens: int, cached: int = 0) -> float:
        cached = max(0, min(cached, tokens))
        read = self.input if self.cache_read is None else self.cache_read
        fresh = self.input if self.cache_write is None else self.cache_write
        return cached * read + (tokens - cached) * fresh


@dataclass(frozen=True, slots=True)
class PromptCosts:
    sent: float
    forwarded: float
    unbroken: float

    @property
    def saved(self) -> float:
        return self.sent - self.forwarded

    @property
    def lost_to_cache_breaks(self) -> float:
        return max(0.0, self.forwarded - self.unbroken)


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSizes:
    """A prompt's tokens as the client sent it and as the proxy forwarded it (tool
    definitions included)."""

    sent: int
    forwarded: int


def prompt_costs(
    prices: Prices, now: PromptSizes, previous: PromptSizes, kept: bool
) -> PromptCosts:
    """The three figures for one request (``now``), after its conversation's ``previous``
    one, whose forwarded prompt it keeps as its prefix or not (``kept``)."""
    return PromptCosts(
        sent=prices.prompt(now.sent, previous.sent),
        forwarded=prices.prompt(now.forwarded, previous.forwarded if kept else 0),
        unbroken=prices.prompt(now.forwarded, previous.forwarded),
    )


MAX_CUT_SHARE = 0.6


def cut_share(prices: Prices | None, growth: int, budget: int) -> float | None:
    """How deep a cut that breaks the cached prefix should go, as a share of the budget.

    A break re-bills the kept prompt ``P`` at the fresh price instead of the read price: a
    premium of ``P * (fresh - read)``. Each later request that keeps the prefix reads ``P`` at
    ``P * read``. So the premium is paid back, in the reads' own currency, after

        n = ceil((fresh - read) / read)

    requests (Anthropic: 11.5 -> 12; OpenAI's half-price reads: 1). The cut leaves room for
    ``n`` requests of the conversation's growth per request before the next break:
    ``share = n * growth / budget``, at most MAX_CUT_SHARE. None when the model has no prices or
    no cache discount, or when nothing is known of the growth: the policy's own share stands
    (the engine never cuts shallower than it).
    """
    if prices is None or growth <= 0 or budget <= 0:
        return None
    read = prices.input if prices.cache_read is None else prices.cache_read
    fresh = prices.input if prices.cache_write is None else prices.cache_write
    if read <= 0 or read >= fresh:
        return None
    n = math.ceil((fresh - read) / read)
    return min(MAX_CUT_SHARE, n * growth / budget)
