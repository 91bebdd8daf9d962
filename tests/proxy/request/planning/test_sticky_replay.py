"""A conversation's last cut replayed with the new messages appended, while it fits; else
None, and the request is cut afresh."""

from __future__ import annotations

from dataclasses import replace

import orjson

from proxy.request.planning.fit_to_budget import fitted
from proxy.request.planning.planner import Planner
from proxy.request.planning.planner_state import attempt_of
from proxy.request.planning.sticky_replay import replay_last_cut
from proxy.request.sticky_cuts import sticky_key
from strategies.budget import Budget
from tests.proxy.request.planning.wire import chat, planner_for, request, settings_for

BUDGET = Budget(window=4096, reserve=256, tools=0, margin=16)


async def first_cut(planner: Planner, messages: list[dict[str, object]]) -> str:
    """The cut of ``messages`` made and remembered; its sticky key."""
    req = request(planner.settings, messages)
    plan = await fitted(attempt_of(planner, req), BUDGET)
    assert "truncate_oldest" in plan.actions and "sticky" not in plan.actions
    key = sticky_key(planner.cuts, req)
    assert key is not None
    return key


async def test_nothing_is_replayed_before_a_cut_was_remembered() -> None:
    planner = planner_for(settings_for())
    req = request(planner.settings, chat(30))
    key = sticky_key(planner.cuts, req)
    assert key is not None
    assert await replay_last_cut(attempt_of(planner, req), key, BUDGET) is None


async def test_the_next_request_replays_the_cut_with_its_new_messages() -> None:
    planner = planner_for(settings_for())
    messages = chat(30)
    key = await first_cut(planner, messages)
    grown = [*messages, {"role": "assistant", "content": "fine"}, {"role": "user", "content": "ok"}]
    req = request(planner.settings, grown)
    plan = await replay_last_cut(attempt_of(planner, req), key, BUDGET)
    assert plan is not None and plan.actions[-1] == "sticky"
    forwarded = orjson.loads(plan.body)["messages"]
    assert forwarded[-2:] == grown[-2:] and forwarded[0] == grown[0]
    assert len(forwarded) < len(grown)
    assert plan.tokens_after is not None and plan.tokens_after <= BUDGET.messages


async def test_a_budget_a_grid_step_larger_cuts_afresh() -> None:
    planner = planner_for(settings_for())
    messages = chat(30)
    key = await first_cut(planner, messages)
    req = request(planner.settings, messages)
    larger = replace(BUDGET, window=BUDGET.window * 2)
    assert await replay_last_cut(attempt_of(planner, req), key, larger) is None


async def test_a_replay_that_no_longer_fits_cuts_afresh() -> None:
    planner = planner_for(settings_for())
    messages = chat(30)
    key = await first_cut(planner, messages)
    grown = [
        *messages,
        {"role": "assistant", "content": "x " * 3000},
        {"role": "user", "content": "?"},
    ]
    req = request(planner.settings, grown)
    assert await replay_last_cut(attempt_of(planner, req), key, BUDGET) is None
