"""What the summarizer is told of a request: its team's quota (a shadow plan's apart), the
room beside the summary, and the messages a summary must leave whole."""

from __future__ import annotations

from dataclasses import replace

from proxy.request.planning.summary_context import shadow_quota, summary_context
from strategies.budget import Budget
from strategies.tokens import MemoCounter
from tests.proxy.request.planning.wire import chat, request, settings_for

BUDGET = Budget(window=4096, reserve=300, tools=0, margin=16)


def test_the_context_is_the_teams_with_the_budgets_reserve_and_window() -> None:
    settings = settings_for()
    req = request(settings, chat(3))
    memo = MemoCounter(req.counter())
    ctx = summary_context(settings, req, BUDGET, memo)
    assert ctx.team == req.team and ctx.counter is memo
    assert ctx.reserve == 300 and ctx.window == 4096
    assert ctx.makes and not ctx.running


def test_pinned_messages_are_left_whole_by_the_summary() -> None:
    settings = settings_for()
    req = request(settings, chat(3))
    pinned = frozenset({id(req.view.messages[1])})
    ctx = summary_context(settings, replace(req, pinned=pinned), BUDGET, MemoCounter(req.counter()))
    assert pinned <= ctx.pinned


def test_a_shadow_plan_counts_its_summaries_apart() -> None:
    settings = settings_for()
    req = replace(request(settings, chat(3)), shadow=True)
    ctx = summary_context(settings, req, BUDGET, MemoCounter(req.counter()))
    assert ctx.team == shadow_quota(req.team) == f"{req.team}:shadow"
