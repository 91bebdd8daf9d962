"""The planner's entry points: the first plan and the overflow retry's, each checked against
the post-condition; a plan that breaks it gives way to the safe plan."""

from __future__ import annotations

from dataclasses import replace

from proxy.request.planning.plan import Plan
from proxy.request.planning.planner import broken
from strategies.engine import Fit
from tests.proxy.request.planning.wire import chat, planner_for, request, settings_for


async def test_the_first_plan_of_a_small_request_is_its_own_bytes() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(1))
    plan = await planner.plan_first(req)
    assert plan.body is req.body and plan.actions == []


async def test_the_retry_fits_to_the_budget_it_is_given() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(3))
    first = await planner.plan_first(req, exact=True)
    assert first.budget is not None and first.actions == []
    smaller = replace(first.budget, margin=first.budget.margin + 2000)
    plan = await planner.plan_fitted(req, smaller)
    assert plan.tokens_after is not None and plan.tokens_after <= smaller.messages
    assert "truncate_oldest" in plan.actions and plan.budget == smaller


async def test_a_plan_that_drops_the_current_message_breaks_the_post_condition() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(30))
    plan = await planner.plan_first(req)
    assert broken(req, plan) is None
    assert plan.fit is not None
    dropped = Fit(
        messages=plan.fit.messages[:-1],
        tokens_before=plan.fit.tokens_before,
        tokens_after=plan.fit.tokens_after,
        budget=plan.fit.budget,
        actions=plan.actions,
    )
    bad = Plan(
        body=plan.body,
        budget=plan.budget,
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_after,
        actions=plan.actions,
    )
    bad.fit = dropped
    assert broken(req, bad) == "protected"


def test_the_budget_is_the_window_less_the_reserve_and_margin() -> None:
    planner = planner_for(settings_for(8192))
    req = request(planner.settings, chat(1), max_tokens=500)
    budget = planner.budget(req, 8192)
    assert budget.window == 8192 and budget.reserve == 500
    assert budget.messages == 8192 - 500 - budget.tools - budget.margin
