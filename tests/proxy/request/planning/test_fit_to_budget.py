"""A fit from the original messages to a budget: the cut within it, deeper for a growing
conversation, and a refusal that names what must be kept when even that cannot fit."""

from __future__ import annotations

import pytest

from proxy.errors import ContextTooLarge
from proxy.request.planning.fit_to_budget import CutTo, EngineCall, cut, engine_fit, fitted, growth
from proxy.request.planning.planner_state import attempt_of
from strategies.budget import Budget
from tests.proxy.request.planning.wire import chat, planner_for, request, settings_for, words

BUDGET = Budget(window=4096, reserve=256, tools=0, margin=16)


async def test_a_conversation_over_its_budget_is_cut_within_it() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(30))
    attempt = attempt_of(planner, req)
    assert attempt.before > BUDGET.messages
    plan = await fitted(attempt, BUDGET)
    assert plan.tokens_after is not None and plan.tokens_after <= BUDGET.messages
    assert "truncate_oldest" in plan.actions and plan.budget == BUDGET
    assert plan.fit is not None and plan.fit.messages[-1] is req.view.messages[-1]


async def test_a_deep_cut_goes_under_its_target_and_reports_the_full_budget() -> None:
    planner = planner_for(settings_for(cache_cut_share=0.0, ledger=0.0))  # no grid, no ledger
    req = request(planner.settings, chat(30))
    target = Budget(window=4096, reserve=256, tools=0, margin=1016)
    to = CutTo(budget=target, full=BUDGET)
    assert to.deep and not CutTo(budget=BUDGET, full=BUDGET).deep
    plan = await cut(attempt_of(planner, req), to)
    shallow = await cut(attempt_of(planner, req), CutTo(budget=BUDGET, full=BUDGET))
    assert plan.budget == BUDGET
    assert plan.tokens_after is not None and shallow.tokens_after is not None
    assert plan.tokens_after <= target.messages < shallow.tokens_after <= BUDGET.messages


async def test_a_system_prompt_too_large_for_the_window_is_refused_by_name() -> None:
    planner = planner_for(settings_for())
    messages = [{"role": "system", "content": words(6000)}, {"role": "user", "content": "hi"}]
    req = request(planner.settings, messages)
    with pytest.raises(ContextTooLarge) as refused:
        await fitted(attempt_of(planner, req), BUDGET)
    assert "system prompt" in refused.value.message
    assert refused.value.before == attempt_of(planner, req).before


def test_the_engine_call_asks_for_the_requests_pins_and_policy() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(3))
    attempt = attempt_of(planner, req)
    summary = frozenset({12345})
    call = EngineCall(attempt=attempt, messages=req.view.messages, kept=summary, share=0.0)
    asked = call.request(BUDGET, cut_newest=True)
    assert asked.budget == BUDGET.messages and asked.counter is attempt.counter
    assert summary <= asked.pinned and asked.cut_newest and asked.cut_share == 0.0
    assert asked.policy is req.policy.engine and asked.keeps_prefix is None


async def test_the_engine_fit_refuses_in_the_clients_terms() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, [{"role": "user", "content": words(6000)}])
    call = EngineCall(attempt=attempt_of(planner, req), messages=req.view.messages)
    with pytest.raises(ContextTooLarge) as refused:
        await engine_fit(call, BUDGET)
    assert refused.value.kept is not None and refused.value.kept > BUDGET.messages


def test_growth_is_the_newest_turns_tokens() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(3))
    memo = attempt_of(planner, req).counter
    assert growth(req.view.messages, memo) == memo.message(req.view.messages[-1])
    assert growth([{"role": "system", "content": "x"}], memo) == 0
