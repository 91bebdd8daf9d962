"""The prompt cost formula, with prices from litellm's model table."""

from __future__ import annotations

import pytest

from proxy.windows.modeltable import ModelTable
from strategies.cost import Prices, PromptSizes, prompt_costs


def table_prices(model: str) -> Prices:
    entry = ModelTable.bundled().lookup(model)
    assert entry is not None and entry.prices is not None
    return entry.prices


def test_prices_come_from_litellms_table() -> None:
    claude = table_prices("claude-sonnet-4-5")
    assert claude.input == pytest.approx(3e-6)
    assert claude.cache_read == pytest.approx(claude.input / 10)
    assert claude.cache_write == pytest.approx(claude.input * 1.25)
    gpt = table_prices("gpt-4o")
    assert gpt.cache_read == pytest.approx(gpt.input / 2)
    assert gpt.cache_write is None


def test_a_cached_prefix_is_billed_at_the_read_price_and_the_rest_at_the_write_price() -> None:
    claude = table_prices("claude-sonnet-4-5")
    cost = claude.prompt(100_000, cached=90_000)
    assert cost == pytest.approx(90_000 * 3e-7 + 10_000 * 3.75e-6)
    gpt = table_prices("gpt-4o")
    assert gpt.prompt(10_000, cached=0) == pytest.approx(10_000 * 2.5e-6)


def test_trimming_that_keeps_the_prefix_saves_and_a_break_costs() -> None:
    claude = table_prices("claude-sonnet-4-5")
    now = PromptSizes(sent=200_000, forwarded=120_000)
    previous = PromptSizes(sent=195_000, forwarded=115_000)
    kept = prompt_costs(claude, now, previous, kept=True)
    assert kept.saved > 0 and kept.lost_to_cache_breaks == 0
    broken = prompt_costs(claude, now, previous, kept=False)
    assert broken.lost_to_cache_breaks == pytest.approx(115_000 * (3.75e-6 - 3e-7))
    # A break on a prompt trimmed only a little costs more than trimming saved.
    now = PromptSizes(sent=100_000, forwarded=95_000)
    previous = PromptSizes(sent=98_000, forwarded=93_000)
    costly = prompt_costs(claude, now, previous, kept=False)
    assert costly.saved < 0


def test_the_cut_depth_pays_the_cache_write_premium_back() -> None:
    from strategies.cost import MAX_CUT_SHARE, cut_share

    claude = table_prices("claude-sonnet-4-5")  # reads 0.1x, writes 1.25x: n = 12
    assert cut_share(claude, growth=1000, budget=100_000) == pytest.approx(12 * 1000 / 100_000)
    assert cut_share(claude, growth=10_000, budget=100_000) == MAX_CUT_SHARE
    gpt = table_prices("gpt-4o")  # reads half price, no write premium: n = 1
    assert cut_share(gpt, growth=1000, budget=100_000) == pytest.approx(0.01)
    assert cut_share(None, 1000, 100_000) is None
    assert cut_share(Prices(1e-6), 1000, 100_000) is None  # no cache discount


def test_the_engine_never_cuts_shallower_than_the_policy_and_deeper_when_asked() -> None:
    from strategies.engine import FitRequest, fit
    from tests.counters import FixedCounter

    messages = [{"role": "system", "content": "s"}]
    for k in range(60):
        messages += [{"role": "user", "content": f"q{k}"}, {"role": "assistant", "content": "a"}]
    messages.append({"role": "user", "content": "now"})
    base = fit(FitRequest(messages=messages, budget=400, counter=FixedCounter(10)))
    shallow = fit(
        FitRequest(messages=messages, budget=400, counter=FixedCounter(10), cut_share=0.01)
    )
    deep = fit(FitRequest(messages=messages, budget=400, counter=FixedCounter(10), cut_share=0.6))
    assert len(shallow.messages) == len(base.messages)
    assert len(deep.messages) < len(base.messages)
