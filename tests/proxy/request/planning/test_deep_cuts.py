"""How deep a fresh cut goes: room for about ten requests' growth, at least the cache grid's
share, at most ``DEEPEST``; never deeper than what must be kept allows."""

from __future__ import annotations

from proxy.request.conversations import Fingerprint
from proxy.request.planning.deep_cuts import (
    DEEPEST,
    STICKY_REQUESTS,
    current_tokens,
    deeper,
    last_prompt,
)
from proxy.request.planning.planner_state import PlannerState
from strategies.budget import Budget
from strategies.tokens import MemoCounter
from tests.proxy.request.planning.wire import chat, planner_for, request, settings_for, words

BUDGET = Budget(window=8000, reserve=500, tools=0, margin=0)  # 7500 for messages


def last(sent: int) -> Fingerprint:
    return Fingerprint(count=3, digest=b"\0" * 16, tokens=sent, sent=sent, at=0.0)


def test_a_conversation_not_seen_growing_is_cut_to_its_budget() -> None:
    req = request(settings_for(), chat(3))
    memo = MemoCounter(req.counter())
    assert deeper(req, BUDGET, 9000, None, memo) is None
    assert deeper(req, BUDGET, 9000, last(9000), memo) is None  # not grown
    assert deeper(req, BUDGET, 9000, last(9500), memo) is None  # shorter than before


def test_a_growing_conversation_is_cut_deeper_by_ten_requests_growth() -> None:
    req = request(settings_for(), chat(3))
    memo = MemoCounter(req.counter())
    deep = deeper(req, BUDGET, 9000, last(8900), memo)  # 100 tokens a request
    assert deep is not None and deep.window == BUDGET.window
    share = max(req.policy.engine.cache_cut_share, STICKY_REQUESTS * 100 / BUDGET.messages)
    assert deep.messages == BUDGET.messages - int(BUDGET.messages * share)


def test_the_cut_goes_no_deeper_than_the_deepest_share() -> None:
    req = request(settings_for(), chat(3))
    deep = deeper(req, BUDGET, 9000, last(1000), MemoCounter(req.counter()))
    assert deep is not None
    assert deep.messages == BUDGET.messages - int(BUDGET.messages * DEEPEST)


def test_what_must_be_kept_bounds_the_depth() -> None:
    messages = [*chat(3), {"role": "assistant", "content": "ok"}]
    messages.append({"role": "user", "content": words(1000)})
    req = request(settings_for(), messages)
    memo = MemoCounter(req.counter())
    floor = current_tokens(req, memo)
    kept = (messages[0], messages[-1])  # the instructions and the current message
    assert floor == memo.priming + sum(memo.message(m) for m in kept)
    small = Budget(window=floor + 100, reserve=0, tools=0, margin=0)
    deep = deeper(req, small, 9000, last(1000), memo)
    assert deep is not None and deep.messages == floor
    assert (
        deeper(req, Budget(window=floor, reserve=0, tools=0, margin=0), 9000, last(1), memo) is None
    )


async def test_the_last_prompt_is_asked_only_under_a_cache_grid() -> None:
    settings = settings_for()
    req = request(settings, chat(3))
    assert (
        await last_prompt(PlannerState(settings=settings, compactor=None), req) is None
    )  # no memory of prompts
    assert await last_prompt(planner_for(settings), req) is None  # none seen yet
    gridless = settings_for(cache_cut_share=0.0)
    assert await last_prompt(planner_for(gridless), request(gridless, chat(3))) is None
