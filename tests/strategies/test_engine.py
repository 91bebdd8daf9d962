from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.budget import byte_bound
from strategies.engine import FitRequest, fit
from strategies.errors import BudgetExceeded, DoesNotFit
from strategies.tokens import ChatCounter, ScaledCounter, count_prompt
from tests.conftest import O200K
from tests.strategies.conversations import conversation
from tests.strategies.invariants import assert_kept_in_order, assert_tool_pairs_intact

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))


def test_fitting_conversation_is_returned_as_is() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    result = fit(FitRequest(messages=msgs, budget=1000, counter=COUNTER))
    assert result.messages is msgs
    assert not result.changed
    assert result.tokens_before == result.tokens_after == count_prompt(COUNTER, msgs)


def test_keeps_system_and_current_turn_and_drops_oldest_turns() -> None:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for i in range(30):
        msgs += [
            {"role": "user", "content": f"question {i} " * 20},
            {"role": "assistant", "content": f"answer {i} " * 20},
        ]
    msgs.append({"role": "user", "content": "last question"})
    result = fit(FitRequest(messages=msgs, budget=400, counter=COUNTER))
    assert result.messages[0] is msgs[0]
    assert result.messages[-1] is msgs[-1]
    assert result.messages[1]["role"] == "user"  # whole turns go, so history starts at a user
    assert result.tokens_after <= 400
    assert result.actions == ["truncate_oldest"]
    assert result.report is not None
    assert result.report.evictions == {"history": "truncated"}


def test_system_prompt_too_big_raises_with_numbers() -> None:
    msgs = [{"role": "system", "content": "rule " * 500}, {"role": "user", "content": "hi"}]
    with pytest.raises(BudgetExceeded) as err:
        fit(FitRequest(messages=msgs, budget=100, counter=COUNTER))
    assert err.value.block_id == "system"
    assert err.value.tokens > err.value.limit


@settings(max_examples=400, deadline=None)
@given(conversation(), st.integers(20, 3000))
def test_fit_invariants(msgs: list[dict[str, Any]], budget: int) -> None:
    try:
        result = fit(FitRequest(messages=msgs, budget=budget, counter=COUNTER))
    except DoesNotFit:
        return  # only when the system prompt and the user's current message are over budget
    assert count_prompt(COUNTER, result.messages) <= budget
    assert_tool_pairs_intact(result.messages)
    assert_kept_in_order(result.messages, msgs)
    last_user = [m for m in msgs if m["role"] == "user"][-1:]
    if last_user:
        assert any(m is last_user[0] for m in result.messages[-len(msgs) :])
    if msgs[0]["role"] == "system":
        assert result.messages[0] is msgs[0]
    assert (
        fit(FitRequest(messages=msgs, budget=budget, counter=COUNTER)).messages == result.messages
    )


@settings(max_examples=300, deadline=None)
@given(conversation(), st.sampled_from([1.0, 1.2, 1.5]))
def test_byte_bound_is_never_below_the_count(msgs: list[dict[str, Any]], ratio: float) -> None:
    counter = COUNTER if ratio == 1.0 else ScaledCounter(COUNTER, ratio)
    body = orjson.dumps({"model": "gpt-4o", "messages": msgs})
    worst = int((85 + 8 * 170) * ratio) + 1
    bound = byte_bound(len(body), msgs, ratio, worst, counter.priming)
    assert bound >= count_prompt(counter, msgs)


def resumed_after_one_long_turn() -> list[dict[str, Any]]:
    """A session resumed: one long agent turn (its task, twelve calls and their failed
    builds' outputs, which are never cleared, its answer), then a new question."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a build agent."},
        {"role": "user", "content": "TASK: fix the failing build in repo foo."},
    ]
    for s in range(12):
        call = {"id": f"c{s}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        failed = f"error: undefined reference to `init_{s}'\n" * 25 + "exit code 1"
        msgs.append({"role": "tool", "tool_call_id": f"c{s}", "content": failed})
    msgs.append({"role": "assistant", "content": "I fixed the linker error in module_3."})
    msgs.append({"role": "user", "content": "now what?"})
    return msgs


def test_a_history_of_one_turn_too_long_keeps_its_task_and_how_it_ended() -> None:
    """Whole turns would leave only the system prompt and the question (a user test saw 26 of
    1,520 tokens forwarded): the turn's task and its newest steps that fit stay, calls with
    their results, the history still opening at a user message."""
    msgs = resumed_after_one_long_turn()
    result = fit(FitRequest(messages=msgs, budget=1520, counter=COUNTER))
    kept = result.messages
    assert result.tokens_after <= 1520
    assert kept[0] is msgs[0] and kept[-1] is msgs[-1]
    assert kept[1] is msgs[1]  # the task
    assert kept[-2] is msgs[-2]  # the answer that ended the turn
    assert len(kept) > 4 and result.tokens_after > 1520 // 2
    assert_kept_in_order(kept, msgs)
    assert_tool_pairs_intact(kept)
