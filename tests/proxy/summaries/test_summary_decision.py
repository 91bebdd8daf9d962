"""proxy/summaries/decision.py: whether to summarize, every rule in one place."""

from __future__ import annotations

from collections.abc import Callable

from proxy.config.policies import PolicyConfig
from proxy.summaries.decision import (
    choose,
    first_sight_truncates,
    on_compact,
    on_request,
    soft_limit,
    worth_preparing,
)
from strategies.checkpoints.chain import prefix_chain
from strategies.checkpoints.cut import SUMMARY_HEADER
from tests.counters import FixedCounter
from tests.strategies.checkpoints.test_chain import ck, conv

SUMMARIZES = PolicyConfig.model_validate({"summarizer": {"soft_threshold": 0.5}})
NEVER = PolicyConfig.model_validate({"summarize": False})
UNSEEN = PolicyConfig.model_validate({"summarizer": {"summarize_unseen": True}})


def test_a_request_compacts_over_its_budget_and_prepares_past_the_soft_limit() -> None:
    assert soft_limit(1000, SUMMARIZES) == 500
    assert on_request(1001, 1000, SUMMARIZES) == "compact"
    assert on_request(501, 1000, SUMMARIZES) == "prepare"
    assert on_request(500, 1000, SUMMARIZES) == "none"
    assert on_request(5000, 1000, NEVER) == "none"  # the engine alone makes it fit
    assert on_request(5000, 1000, NEVER, session_memory="notes") == "compact"


def test_over_the_budget_a_stored_view_is_reused_and_a_first_sight_truncated() -> None:
    msgs = conv(12)
    chain = prefix_chain(msgs)
    counter = FixedCounter(10)
    asked: list[bool] = []

    def seen(answer: bool) -> Callable[[], bool]:
        def ask() -> bool:
            asked.append(answer)
            return answer

        return ask

    fits = choose([ck(8, chain)], chain, msgs, budget=70, soft=65, counter=counter)
    assert on_compact(fits, seen(False), SUMMARIZES) == "reuse" and not asked  # not asked
    late = choose([ck(8, chain)], chain, msgs, budget=70, soft=40, counter=counter)
    assert on_compact(late, seen(False), SUMMARIZES) == "reuse-and-refresh"
    stale = choose([ck(2, chain)], chain, msgs, budget=60, soft=50, counter=counter)
    assert on_compact(stale, seen(False), SUMMARIZES) == "make"  # updates ck2, seen or not
    none = choose([], chain, msgs, budget=60, soft=50, counter=counter)
    assert on_compact(none, seen(False), SUMMARIZES) == "truncate"
    assert on_compact(none, seen(True), SUMMARIZES) == "make"
    assert on_compact(none, seen(False), UNSEEN) == "make"
    assert first_sight_truncates(False, SUMMARIZES) and not first_sight_truncates(True, SUMMARIZES)


def test_past_the_soft_limit_a_summary_starts_only_when_it_will_be_wanted() -> None:
    msgs = conv(12)
    chain = prefix_chain(msgs)
    counter = FixedCounter(10)
    fresh = choose([ck(8, chain)], chain, msgs, budget=70, soft=65, counter=counter)
    late = choose([ck(8, chain)], chain, msgs, budget=70, soft=40, counter=counter)
    stale = choose([ck(2, chain)], chain, msgs, budget=60, soft=50, counter=counter)
    none = choose([], chain, msgs, budget=60, soft=50, counter=counter)
    assert not worth_preparing(fresh, lambda: True)
    assert worth_preparing(late, lambda: False) and worth_preparing(stale, lambda: False)
    assert worth_preparing(none, lambda: True) and not worth_preparing(none, lambda: False)


def test_choose_reuses_a_fitting_view_and_asks_for_a_refresh_past_the_soft_limit() -> None:
    msgs = conv(12)
    chain = prefix_chain(msgs)
    counter = FixedCounter(10)  # 10 a message: the view of a checkpoint covering 8 is 6 x 10
    fits = choose([ck(8, chain)], chain, msgs, budget=70, soft=65, counter=counter)
    assert fits.best is not None and fits.view is not None and not fits.refresh
    assert fits.view[1]["content"].startswith(SUMMARY_HEADER)
    late = choose([ck(8, chain)], chain, msgs, budget=60, soft=40, counter=counter)
    assert late.view is not None and late.refresh  # reuse now, update ahead of time
    over = choose([ck(2, chain)], chain, msgs, budget=60, soft=50, counter=counter)
    assert over.best is not None and over.view is None  # create, updating ck2
    none = choose([], chain, msgs, budget=60, soft=50, counter=counter)
    assert none.best is None and none.view is None
