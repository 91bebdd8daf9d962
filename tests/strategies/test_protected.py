"""What every plan keeps (strategies/protected.py), and the engine keeping it: the leading
instructions, the task and the newest step, in a chat turn and in a running task; attached
messages (a client's mid-conversation ``system`` messages) going with the step they follow."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.attached import CLEARED, ReattachedClear, kind, stale_reminders
from strategies.engine import FitRequest, Policy, fit
from strategies.errors import DoesNotFit
from strategies.messages import units
from strategies.protected import protected
from strategies.rules import DEFAULT_RULES, DOCUMENTS_RULE, SYSTEM_RULE, pairs_whole
from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.strategies.invariants import assert_newest_step_kept, least_floor

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))
SYSTEM = {"role": "system", "content": "You are a helpful assistant. " * 20}


def call(k: int) -> dict[str, Any]:
    fn = {"name": "read_file", "arguments": f'{{"path": "f{k}"}}'}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"c{k}", "type": "function", "function": fn}]}  # fmt: skip


def result(k: int, words: int = 150) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{k}", "content": f"file {k}: " + "lorem " * words}


def chat_loop(turns: int, calls: int = 1) -> list[dict[str, Any]]:
    """The simplest chat tool loop: a user asks, the assistant calls, the tool answers, the
    assistant answers (the newest turn has no answer yet)."""
    out: list[dict[str, Any]] = [SYSTEM]
    k = 0
    for t in range(turns):
        out.append({"role": "user", "content": f"Turn {t}: read the next files. " + "word " * 30})
        for _ in range(calls):
            out += [call(k), result(k)]
            k += 1
        if t < turns - 1:
            out.append({"role": "assistant", "content": f"Files read in turn {t}."})
    return out


def test_a_chat_turns_task_and_newest_step_are_protected() -> None:
    messages = chat_loop(3, calls=2)
    guard = protected(messages, DEFAULT_RULES)
    assert guard.leading == (0,)
    assert messages[guard.task]["content"].startswith("Turn 2")
    assert [m["role"] for m in messages[guard.newest :]] == ["assistant", "tool"]
    assert messages[guard.newest] is messages[-2]


def test_a_new_turn_protects_its_user_message_alone() -> None:
    messages = [*chat_loop(2), {"role": "assistant", "content": "done"}]
    messages.append({"role": "user", "content": "next"})
    guard = protected(messages, DEFAULT_RULES)
    assert guard.task == len(messages) - 1 and list(guard.step) == []
    assert guard.indices() == [0, len(messages) - 1]


def test_documents_and_injected_facts_are_not_protected_instructions() -> None:
    messages = [SYSTEM, {"role": "system", "content": "doc"}, {"role": "user", "content": "q"}]
    assert protected(messages, (SYSTEM_RULE, DOCUMENTS_RULE)).leading == (0,)
    assert protected(messages, DEFAULT_RULES).leading == (0, 1)


@settings(max_examples=120, deadline=None)
@given(turns=st.integers(1, 12), calls=st.integers(1, 4), share=st.floats(0.05, 1.0))
def test_the_engine_never_drops_the_newest_step_of_a_chat_turn(
    turns: int, calls: int, share: float
) -> None:
    """Whatever the budget and the cache grid, a fit of a chat tool loop keeps the system
    prompt, the task and the newest step, the same objects; when they cannot fit whole, the
    step's outputs are cut (never its calls), and it refuses only when even that cannot fit."""
    messages = chat_loop(turns, calls)
    guard = protected(messages, DEFAULT_RULES)
    floor = count_prompt(COUNTER, [messages[i] for i in guard.indices()])
    budget = max(1, int(count_prompt(COUNTER, messages) * share))
    try:
        result_ = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER))
    except DoesNotFit:
        assert budget < least_floor(COUNTER, messages, guard.indices()) + 8
        return
    kept = result_.messages
    assert count_prompt(COUNTER, kept) <= budget
    assert pairs_whole(kept)
    assert kept[0] is SYSTEM
    assert_newest_step_kept(messages, kept, guard.newest, cut=budget < floor)
    assert any(m is messages[guard.task] for m in kept)


def test_the_cache_grid_never_takes_the_newest_step() -> None:
    """The issue's case: a cut to a deeper target that only the current turn's tool loop can
    meet is refused by the engine when the caller has a larger budget to try next
    (``cut_newest=False``), so the planner cuts to the plain budget instead; as the last
    resort, the step's outputs are cut and its calls kept."""
    messages = chat_loop(3)
    guard = protected(messages, DEFAULT_RULES)
    floor = count_prompt(COUNTER, [messages[i] for i in guard.indices()])
    policy = Policy(cache_cut_share=0.3)
    try:
        kept = fit(
            FitRequest(
                messages=messages,
                budget=floor - 50,
                counter=COUNTER,
                policy=policy,
                cut_newest=False,
            )
        ).messages
    except DoesNotFit as exc:
        assert exc.block_id == "newest"
    else:
        raise AssertionError(f"the newest step was cut: {[m['role'] for m in kept]}")
    last = fit(FitRequest(messages=messages, budget=floor - 50, counter=COUNTER, policy=policy))
    assert count_prompt(COUNTER, last.messages) <= floor - 50
    assert "step-outputs-cut 1" in last.actions
    assert_newest_step_kept(messages, last.messages, guard.newest, cut=True)


REMINDER = {"role": "system", "content": "The task tools haven't been used recently. " * 5}


def test_an_attached_message_goes_with_the_step_it_follows() -> None:
    messages = [SYSTEM, {"role": "user", "content": "task"}, call(1), result(1), REMINDER]
    messages += [call(2), result(2)]
    assert [(u.start, u.end) for u in units(messages)] == [(0, 1), (1, 2), (2, 5), (5, 7)]
    leading = [SYSTEM, {"role": "developer", "content": "rules"}, {"role": "user", "content": "x"}]
    assert len(units(leading)) == 3  # the leading run stays one message a unit


def test_repeated_reminders_keep_only_the_newest() -> None:
    other = {"role": "system", "content": "Skills: deep-research, review."}
    numbered = [{"role": "system", "content": f"Todo list has {n} items left."} for n in (3, 2)]
    messages = [SYSTEM, {"role": "user", "content": "task"}, other, call(1), result(1)]
    messages += [dict(REMINDER), numbered[0], call(2), result(2), dict(REMINDER), numbered[1]]
    messages += [call(3), result(3), dict(REMINDER)]
    assert kind(numbered[0]) == kind(numbered[1])
    stale = stale_reminders(messages)
    assert [messages[i]["content"] for i in stale] == [
        REMINDER["content"], numbered[0]["content"], REMINDER["content"]
    ]  # fmt: skip
    assert stale_reminders(messages, keep={stale[0]}) == stale[1:]


def test_the_engine_drops_stale_reminders_first_and_says_so() -> None:
    messages = [SYSTEM, {"role": "user", "content": "task"}]
    for k in range(12):
        messages += [call(k), result(k, 20), dict(REMINDER)]
    budget = count_prompt(COUNTER, messages) - COUNTER.message(REMINDER) * 5
    out = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True))
    assert out.actions[0] == "reminders-dropped 11"
    assert sum(m.get("role") == "system" for m in out.messages) == 2
    assert out.messages[-1] is messages[-1]  # the newest one stays, with its step


def test_reattached_tool_output_is_cleared_like_tool_output() -> None:
    files = 'Called the Read tool with the following input: {"file_path": "a.py"}\n'
    files += "Result of calling the Read tool:\n" + "print('x')\n" * 400
    attachment = {"role": "system", "content": files}
    agents = {"role": "system", "content": "Available agent types for the Agent tool: " * 40}
    messages = [SYSTEM, {"role": "user", "content": "summary of the session"}, attachment, agents]
    messages += [call(1), result(1)]
    out = ReattachedClear().apply(messages, COUNTER)
    assert out[2]["content"].startswith(CLEARED) and "Read tool" in out[2]["content"]
    assert out[3] is agents and out[0] is SYSTEM
    again = ReattachedClear().apply(messages, COUNTER)
    assert again[2] == out[2]  # the same bytes in every request
    assert ReattachedClear().apply(out, COUNTER)[2] is out[2]  # and only once
    budget = count_prompt(COUNTER, messages) - 1000
    fitted = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True))
    assert "reattached_clear" in fitted.actions
    assert fitted.messages[1] is messages[1] and fitted.messages[-2:] == messages[-2:]
