"""The ledger beside a cut: room reserved for what the cut will remove, the ledger of what it
did remove written after the leading instructions, within the cap and the room left."""

from __future__ import annotations

from proxy.request.planning.ledger import (
    LEDGER,
    NONE,
    LedgerCut,
    add_ledger,
    cap,
    reserve,
    summary_front,
)
from strategies.budget import Budget
from strategies.engine import Fit
from strategies.ledger import MAX_TOKENS
from strategies.tokens import MemoCounter, count_prompt
from tests.proxy.request.planning.wire import request, settings_for

MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Task: always use tabs. We decided to keep the API stable."},
    {"role": "assistant", "content": "Noted: tabs, API stable. " + "detail " * 300},
    {"role": "user", "content": "Remember the file src/app.py must not change. " + "x " * 300},
    {"role": "assistant", "content": "Understood. " + "more " * 300},
    {"role": "user", "content": "Now write the tests."},
]


def cutting(budget: Budget, **policy: object) -> LedgerCut:
    req = request(settings_for(8000, **policy), MESSAGES)
    memo = MemoCounter(req.counter())
    before = count_prompt(memo, req.view.messages)
    return LedgerCut(req=req, counter=memo, before=before, budget=budget, full=budget, whole=budget)


def test_the_cap_is_the_policys_share_of_the_budget_at_most_max_tokens() -> None:
    c = cutting(Budget(window=8000, reserve=0, tools=0, margin=0))
    share = c.req.policy.engine.ledger_share
    assert cap(c.req, c.full) == min(int(8000 * share), MAX_TOKENS)


def test_no_room_is_reserved_when_the_ledger_is_off() -> None:
    c = cutting(Budget(window=500, reserve=0, tools=0, margin=0), ledger=0.0)
    assert reserve(c) is NONE


def test_room_is_reserved_for_the_messages_the_cut_will_remove() -> None:
    c = cutting(Budget(window=500, reserve=0, tools=0, margin=0))
    reserved = reserve(c)
    assert reserved.tokens > 0 and reserved.text is not None
    assert 0 in reserved.guard and len(MESSAGES) - 1 in reserved.guard  # instructions, task
    assert reserved.indices and not set(reserved.indices) & reserved.guard


def test_the_ledger_of_what_a_cut_removed_goes_after_the_instructions() -> None:
    c = cutting(Budget(window=2000, reserve=0, tools=0, margin=0))
    original = c.req.view.messages
    kept = [original[0], original[-1]]
    fit = Fit(
        messages=kept,
        tokens_before=c.before,
        tokens_after=count_prompt(c.counter, kept),
        budget=c.budget.messages,
        actions=["truncate_oldest"],
    )
    result = add_ledger(c, fit)
    assert result.actions == ["truncate_oldest", LEDGER]
    assert result.messages[0] is original[0] and result.messages[-1] is original[-1]
    ledger = result.messages[1]
    assert ledger["role"] == c.req.policy.config.summary_role and "tabs" in ledger["content"]
    assert result.tokens_after == count_prompt(c.counter, result.messages)


def test_no_ledger_when_the_fit_left_no_room() -> None:
    c = cutting(Budget(window=2000, reserve=0, tools=0, margin=0))
    original = c.req.view.messages
    kept = [original[0], original[-1]]
    fit = Fit(messages=kept, tokens_before=c.before, tokens_after=2000, budget=2000)
    assert add_ledger(c, fit).actions == []


def test_the_summary_front_is_what_a_summary_puts_before_the_verbatim_tail() -> None:
    original = list(MESSAGES)
    summary = {"role": "user", "content": "[summary]"}
    compacted = [original[0], summary, *original[4:]]
    assert summary_front(compacted, original) == frozenset({id(original[0]), id(summary)})
    assert summary_front(original, original) == frozenset()
