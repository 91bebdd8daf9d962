"""A plan and how a fit becomes one: the original bytes when nothing changed, the kept
messages written back in the request's format when something did."""

from __future__ import annotations

import orjson

from proxy.request.planning.plan import Plan, plan_of_fit
from proxy.request.planning.planner_state import attempt_of
from strategies.budget import Budget
from strategies.engine import Fit
from tests.proxy.request.planning.wire import chat, planner_for, request, settings_for

BUDGET = Budget(window=4096, reserve=256, tools=10, margin=16)


def test_a_plan_says_its_prompts_with_the_tool_definitions() -> None:
    plan = Plan(body=b"{}", budget=BUDGET, tokens_before=900, tokens_after=500)
    assert plan.prompts == (910, 510)
    assert plan.counted_prompt == 510 and plan.near
    bound = Plan(body=b"{}", budget=BUDGET, tokens_before=900, tokens_after=900, counted="bound")
    assert bound.counted_prompt is None and not bound.near
    assert Plan(body=b"{}", budget=None).prompts is None


def test_a_fit_that_changed_nothing_forwards_the_original_bytes() -> None:
    settings = settings_for()
    req = request(settings, chat(2))
    attempt = attempt_of(planner_for(settings), req)
    fit = Fit(
        messages=req.view.messages,
        tokens_before=attempt.before,
        tokens_after=attempt.before,
        budget=BUDGET.messages,
    )
    plan = plan_of_fit(attempt, BUDGET, fit, [], None)
    assert plan.body is req.body and plan.actions == [] and plan.fit is fit


def test_a_fit_that_cut_forwards_its_messages_in_the_request_format() -> None:
    settings = settings_for()
    req = request(settings, chat(4), max_tokens=100)
    attempt = attempt_of(planner_for(settings), req)
    kept = [req.view.messages[0], *req.view.messages[-3:]]
    fit = Fit(messages=kept, tokens_before=attempt.before, tokens_after=50, budget=1000)
    plan = plan_of_fit(attempt, BUDGET, fit, ["truncate_oldest"], "created ck_1")
    body = orjson.loads(plan.body)
    assert body["messages"] == kept and body["max_tokens"] == 100
    assert plan.actions == ["truncate_oldest"] and plan.checkpoint == "created ck_1"
    assert (plan.tokens_before, plan.tokens_after) == (attempt.before, 50)
