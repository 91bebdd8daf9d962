"""A long agent task inside one running turn: one user message, then many tool steps.

The formats whose APIs bind reasoning or thinking to its items ask the engine for an atomic
current turn. The engine keeps the task message and the newest step byte for byte, never
rewrites an assistant message, clears the results of completed steps first and drops whole
steps, oldest first, only when that is not enough.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.engine import FitRequest, fit
from strategies.errors import DoesNotFit
from strategies.microcompact import CLEARED
from strategies.rules import drop_broken_pairs, running_task
from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.strategies.invariants import CUT_MARK, assert_newest_step_kept, least_floor

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))
TASK = {"role": "user", "content": "Read every file of the project and report what it does."}


def loop(steps: int, result_words: int = 150) -> list[dict[str, Any]]:
    """A system prompt, the task, and ``steps`` tool steps (a call and its result each)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, TASK]
    for k in range(steps):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "shell", "arguments": f'{{"cmd": "cat file-{k}.py"}}'},
        }
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        text = " ".join(f"line{k}_{i}" for i in range(result_words))
        out.append({"role": "tool", "tool_call_id": f"call_{k}", "content": text})
    return out


def check(
    messages: list[dict[str, Any]], kept: list[dict[str, Any]], budget: int, cut: bool = False
) -> None:
    """``cut``: the task and its newest step could not fit whole (its output may be cut)."""
    assert count_prompt(COUNTER, kept) <= budget
    assert drop_broken_pairs(kept) == kept  # every call with its result
    ids = {id(m) for m in messages}
    task, newest = running_task(messages, 1)
    assert any(m is messages[task] for m in kept)
    assert_newest_step_kept(messages, kept, newest, cut)
    for m in kept:
        if m["role"] != "tool":
            assert id(m) in ids  # assistant, user and system messages go as they came


def test_a_task_that_outgrows_the_window_is_fitted_not_refused() -> None:
    messages = loop(40)
    total = count_prompt(COUNTER, messages)
    budget = total // 10  # clearing every old result is not enough: old steps go too
    result = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True))
    check(messages, result.messages, budget)
    calls = [m for m in result.messages if m["role"] == "assistant"]
    assert 1 < len(calls) < 40
    assert calls[-1] is messages[-2]
    cleared = sum(1 for m in result.messages if str(m.get("content")).startswith(CLEARED))
    # The report says it in a user's words: outputs cleared, steps dropped.
    report = [f"outputs-cleared {cleared}"] if cleared else []
    report.append(f"steps-dropped {40 - len(calls)}")
    assert result.actions == ["tool_result_microcompact", "truncate_oldest", *report]


def test_old_results_are_cleared_before_steps_are_dropped() -> None:
    messages = loop(12)
    total = count_prompt(COUNTER, messages)
    result = fit(
        FitRequest(messages=messages, budget=int(total * 0.7), counter=COUNTER, atomic_current=True)
    )
    check(messages, result.messages, int(total * 0.7))
    assert result.actions == ["tool_result_microcompact", "outputs-cleared 7"]
    assert len(result.messages) == len(messages)  # every step is still there
    cleared = [
        m for m in result.messages if m["role"] == "tool" and m["content"].startswith(CLEARED)
    ]
    assert len(cleared) == 12 - 5  # the default keeps the five newest results


def test_the_instructions_the_task_and_the_newest_call_alone_must_fit() -> None:
    """A newest step too large to fit whole has its output cut; the fit is refused only when
    the instructions, the task and the call itself leave no room for even a cut output."""
    messages = loop(3, result_words=2000)
    newest = count_prompt(COUNTER, messages[-2:])
    result = fit(FitRequest(messages=messages, budget=newest, counter=COUNTER, atomic_current=True))
    assert "step-outputs-cut 1" in result.actions
    assert count_prompt(COUNTER, result.messages) <= newest
    assert result.messages[-2] is messages[-2]
    assert result.messages[-1]["content"].startswith(CUT_MARK)
    frame = count_prompt(COUNTER, [*messages[:2], messages[-2]])
    with pytest.raises(DoesNotFit) as exc:
        fit(FitRequest(messages=messages, budget=frame + 20, counter=COUNTER, atomic_current=True))
    assert exc.value.block_id == "running-turn"


def test_text_that_continues_the_loop_is_not_the_task() -> None:
    """Claude Code puts reminders after its tool results, in the same message: the Messages
    view shows them as a user message the adapter names as continuing the loop."""
    messages = loop(30)
    reminder = {"role": "user", "content": "<system-reminder>keep going</system-reminder>"}
    messages.insert(10, reminder)
    total = count_prompt(COUNTER, messages)
    budget = total // 4
    result = fit(
        FitRequest(
            messages=messages,
            budget=budget,
            counter=COUNTER,
            atomic_current=True,
            continuing=frozenset({id(reminder)}),
        )
    )
    assert result.messages[1] is TASK
    assert count_prompt(COUNTER, result.messages) <= budget
    assert drop_broken_pairs(result.messages) == result.messages


@settings(max_examples=150, deadline=None)
@given(steps=st.integers(1, 40), words=st.integers(5, 400), share=st.floats(0.05, 1.0))
def test_running_task_invariants(steps: int, words: int, share: float) -> None:
    messages = loop(steps, words)
    total = count_prompt(COUNTER, messages)
    budget = max(1, int(total * share))
    floor = count_prompt(COUNTER, [*messages[:2], *messages[-2:]])
    try:
        result = fit(
            FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True)
        )
    except DoesNotFit:
        # only when the task and the newest step, its output cut, do not fit
        assert (
            budget
            < least_floor(COUNTER, messages, [0, 1, len(messages) - 2, len(messages) - 1]) + 8
        )
        return
    check(messages, result.messages, budget, cut=budget < floor)


def test_a_large_task_stays_whole_while_dropping_steps_makes_room() -> None:
    task = {"role": "user", "content": "Start here. " + "context " * 4000 + "End: do it now."}
    messages = loop(10)
    messages[1] = task
    budget = count_prompt(COUNTER, messages[2:]) + 500
    result = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True))
    assert result.messages[1] is task
    assert "task_middle_cut" not in result.actions
    assert result.messages[-2:] == messages[-2:]
    assert count_prompt(COUNTER, result.messages) <= budget


def test_a_task_the_protected_messages_cannot_fit_beside_has_its_middle_cut() -> None:
    """The last resort before a refusal: the leading instructions, the task and the newest step
    do not fit whole, so the task's middle goes, to exactly what the others leave."""
    task = {"role": "user", "content": "Start here. " + "context " * 4000 + "End: do it now."}
    messages = loop(10)
    messages[1] = task
    protected = [messages[0], task, *messages[-2:]]
    budget = count_prompt(COUNTER, protected) - COUNTER.message(task) // 2
    result = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True))
    kept = result.messages[1]["content"]
    assert kept.startswith("Start here.") and kept.endswith("End: do it now.")
    assert "characters of this message removed to fit the context window" in kept
    assert "task_middle_cut" in result.actions
    assert result.messages[-2:] == messages[-2:]
    assert count_prompt(COUNTER, result.messages) <= budget
    again = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True))
    assert again.messages[1] == result.messages[1]  # the same cut, the same bytes
