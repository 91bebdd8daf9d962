"""What is given before a refusal: a reply reserve the client did not ask for shrinks to what
the window leaves; an asked limit the policy may lower is lowered to what the window leaves
beside the prompt; a request is refused only when even what must be kept cannot fit."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from proxy.errors import ContextTooLarge
from proxy.request.planning.allowances import fitted_or_uncertain, roomy, uncounted, within
from proxy.request.planning.plan import Plan
from proxy.request.planning.planner_state import attempt_of
from strategies.budget import Budget
from tests.proxy.request.planning.wire import planner_for, request, settings_for, words

WINDOW = 4096


def big_task(tokens: int) -> list[dict[str, str]]:
    """A system prompt and one user message of about ``tokens``: all of it must be kept."""
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": words(tokens)}]


async def test_a_reserve_nobody_asked_for_shrinks_for_what_must_be_kept() -> None:
    planner = planner_for(settings_for(WINDOW))
    req = request(planner.settings, big_task(1700))
    budget = planner.budget(req, WINDOW)
    attempt = attempt_of(planner, req)
    assert attempt.before > budget.messages  # the default reserve leaves it no room
    plan = await roomy(attempt, budget)
    assert plan.budget is not None and plan.budget.reserve < budget.reserve
    assert plan.tokens_after == attempt.before  # kept whole: nothing else to cut


async def test_what_must_be_kept_beyond_the_window_is_refused() -> None:
    planner = planner_for(settings_for(WINDOW))
    req = request(planner.settings, big_task(5000))
    attempt = attempt_of(planner, req)
    with pytest.raises(ContextTooLarge):
        await fitted_or_uncertain(attempt, planner.budget(req, WINDOW))


def test_chat_has_no_uncounted_envelopes() -> None:
    req = request(settings_for(), big_task(10))
    assert uncounted(req) == 0


def test_an_asked_limit_is_lowered_to_what_the_window_leaves_beside_the_prompt() -> None:
    settings = settings_for(WINDOW, min_output_tokens=1000)
    req = request(settings, big_task(10), max_tokens=3000)
    req = replace(req, calibrated=True)
    budget = Budget(window=WINDOW, reserve=3000, tools=0, margin=16)
    plan = Plan(
        body=req.body,
        budget=budget,
        tokens_before=2000,
        tokens_after=2000,
        actions=["truncate_oldest"],
    )
    lowered = within(req, budget, plan)
    room = WINDOW - 16 - 2000
    assert orjson.loads(lowered.body)["max_tokens"] == room
    assert lowered.actions == ["truncate_oldest", f"max-tokens-lowered 3000->{room}"]
    small = Plan(body=req.body, budget=budget, tokens_before=100, tokens_after=100, actions=[])
    assert within(req, budget, small) is small  # room for the whole limit: as it was
