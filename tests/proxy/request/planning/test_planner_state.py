"""An attempt counts its request once, with the counter it is given, and the planner's state
keeps its memories per planner."""

from __future__ import annotations

from proxy.request.planning.planner_state import PlannerState, attempt_of
from strategies.tokens import MemoCounter, count_prompt
from tests.proxy.request.planning.wire import chat, request, settings_for


def test_an_attempt_counts_the_original_messages_once_when_not_given() -> None:
    settings = settings_for()
    req = request(settings, chat(3))
    state = PlannerState(settings=settings, compactor=None)
    attempt = attempt_of(state, req)
    assert attempt.before == count_prompt(MemoCounter(req.counter()), req.view.messages)
    assert attempt.planner is state and attempt.req is req and not attempt.dry_run


def test_an_attempt_keeps_the_count_and_memo_it_is_given() -> None:
    settings = settings_for()
    req = request(settings, chat(3))
    memo = MemoCounter(req.counter())
    attempt = attempt_of(
        PlannerState(settings=settings, compactor=None), req, 12345, memo, dry_run=True
    )
    assert attempt.before == 12345  # taken as made, not counted again
    assert attempt.counter is memo and attempt.dry_run


def test_each_planner_state_has_its_own_recent_counts() -> None:
    settings = settings_for()
    one, two = (
        PlannerState(settings=settings, compactor=None),
        PlannerState(settings=settings, compactor=None),
    )
    assert one.recent is not two.recent
    assert one.prefixes is None and one.cuts is None and one.recalls is None
