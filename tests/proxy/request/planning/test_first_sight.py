"""A request's first sight: passed through when the proxy cannot or may not trim it, sent on
its byte bound when that alone puts it under the limit, else counted and, over the budget,
fitted."""

from __future__ import annotations

from proxy.request.planning.first_sight import first_sight
from strategies.tokens import count_prompt
from tests.proxy.request.planning.wire import chat, planner_for, request, settings_for


async def test_a_small_request_goes_on_its_byte_bound_uncounted() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(1))
    plan = await first_sight(planner, req, exact=False, dry_run=False)
    assert plan.counted == "bound" and plan.body is req.body and plan.actions == []
    assert plan.tokens_before == plan.tokens_after


async def test_an_exact_first_sight_counts_and_sends_the_same_bytes() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(1))
    plan = await first_sight(planner, req, exact=True, dry_run=False)
    assert plan.counted == "exact" and plan.body is req.body and plan.actions == []
    assert plan.tokens_after == count_prompt(req.counter(), req.view.messages)


async def test_a_request_over_its_budget_is_fitted() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(30))
    plan = await first_sight(planner, req, exact=False, dry_run=False)
    assert plan.counted == "exact" and "truncate_oldest" in plan.actions
    assert plan.budget is not None and plan.tokens_after is not None
    assert plan.tokens_after <= plan.budget.messages < (plan.tokens_before or 0)


async def test_an_unknown_window_or_trimming_off_passes_through() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(30))
    req.window = None
    plan = await first_sight(planner, req, exact=False, dry_run=False)
    assert plan.actions == ["unknown-window"] and plan.body is req.body
    req = request(planner.settings, chat(30))
    req.trim = False
    plan = await first_sight(planner, req, exact=False, dry_run=False)
    assert plan.actions == ["trimming-disabled"] and plan.counted == "none"
