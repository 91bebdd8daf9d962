"""Cutting inside the newest step (strategies/step_cut.py): the last resort before a refusal.

The hidden corpus's shape (a newest step that called three tools at once, 847 + 640 + 485
tokens of output, at a 2,048-token window) and a property over newest steps of 1-5 calls with
outputs up to 20 times the room: no refusal while the instructions, the task and the calls fit;
every call keeps its result; every error line is kept; the prompt within its budget."""

from __future__ import annotations

import random
import re
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from strategies.engine import FitRequest, Policy, fit
from strategies.errors import DoesNotFit
from strategies.rules import pairs_whole
from strategies.step_cut import (
    OPENING,
    Aim,
    cut_output,
    cut_part,
    cut_step,
    least,
    text_cost,
    water_level,
)
from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.strategies.invariants import CUT_MARK, assert_newest_step_kept

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))
WORDS = ("alpha", "beta", "gamma", "delta", "build", "module", "function", "value", "parse")
SYSTEM = {"role": "system", "content": "You are a coding agent. Fix what fails."}
TASK = {"role": "user", "content": "Fix the failing build in this repository."}


def words(n: int, seed: int) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def log(lines: int, seed: int, errors: tuple[int, ...] = ()) -> str:
    """A command's output of ``lines`` lines, with error lines at the given line numbers."""
    rnd = random.Random(seed)
    out = []
    for k in range(lines):
        if k in errors:
            out.append(f"FAILED tests/test_mod{k}.py::test_case_{k} - AssertionError: {k} != 0")
        else:
            out.append(f"{k:5d} | " + " ".join(rnd.choice(WORDS) for _ in range(8)))
    return "\n".join(out)


def step(outputs: list[str], start: int = 0) -> list[dict[str, Any]]:
    calls = [
        {"id": f"c{k}", "type": "function",
         "function": {"name": "shell", "arguments": f'{{"cmd": "run {k}"}}'}}
        for k in range(start, start + len(outputs))
    ]  # fmt: skip
    out: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": calls}]
    for k, text in enumerate(outputs, start=start):
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": text})
    return out


def test_the_water_level_cuts_the_largest_first() -> None:
    assert water_level([1000, 400, 100], 300) == 700  # only the largest is cut
    assert water_level([1000, 400, 100], 700) == 350  # both larger ones, to the same level
    assert water_level([100], 500) == 0  # not enough to cut


def test_an_output_keeps_its_head_its_tail_and_every_error_line() -> None:
    text = log(5000, 1, errors=(7, 1200, 2500, 4100))
    cut = cut_output(text, 800, COUNTER)
    assert cut is not None
    assert COUNTER.message({"role": "tool", "content": cut}) <= 800 + 4
    lines = cut.split("\n")
    assert lines[0].startswith(CUT_MARK) and "every error line kept" in lines[0]
    assert "run the tool again narrower" in lines[0]
    assert lines[1] == text.split("\n")[0]  # the head
    assert lines[-1] == text.split("\n")[-1]  # the tail
    for k in (7, 1200, 2500, 4100):
        assert f"test_case_{k} " in cut
    assert "the error lines among them follow" in cut


def test_one_long_line_is_cut_by_characters() -> None:
    text = "x" * 40_000  # a minified bundle, one line
    cut = cut_output(text, 300, COUNTER)
    assert cut is not None and "characters of line 1 cut" in cut
    assert COUNTER.message({"role": "tool", "content": cut}) <= 300 + 4


def test_the_hidden_corpus_shape_is_fitted_not_refused() -> None:
    """Three calls at once in the newest step, 847 + 640 + 485 tokens of output, after older
    steps, at a 2,048-token window (a 512-token reply reserve)."""
    history = [*step([words(300, 1)], 0), *step([words(300, 2)], 1)]
    newest = step([words(847, 3), words(640, 4), words(485, 5)], 10)
    messages = [SYSTEM, TASK, *history, *newest]
    budget = 2048 - 512
    try:
        fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, cut_newest=False))
    except DoesNotFit:
        pass  # what the release before this one answered: a refusal
    else:
        raise AssertionError("the protected messages fitted whole: not the corpus's shape")
    result = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER))
    kept = result.messages
    assert count_prompt(COUNTER, kept) <= budget
    assert pairs_whole(kept)
    assert kept[0] is SYSTEM and kept[1] is TASK
    assert_newest_step_kept(messages, kept, len(messages) - 4, cut=True)
    assert any(a.startswith("step-outputs-cut") for a in result.actions)


def test_a_cut_output_names_its_recall_handle_under_recall() -> None:
    messages = [SYSTEM, TASK, *step([log(3000, 2)])]
    result = fit(
        FitRequest(messages=messages, budget=600, counter=COUNTER, policy=Policy(recall=True))
    )
    first = result.messages[-1]["content"].split("\n", 1)[0]
    assert first.startswith(CUT_MARK) and "recall: r" in first


@pytest.mark.parametrize("budget", [250, 300, 500, 600, 900, 1150])
def test_under_recall_the_marker_is_priced_with_its_handle(budget: int) -> None:
    """The handle the marker names (``r`` and 12 hex digits) costs more than the word the cut
    held its place with: the cut came out over its cap and was given up (the request refused
    at each of these budgets). Priced as sent, it keeps its error line, and about as much as
    a cut without recall."""
    messages = [SYSTEM, TASK, *step([log(3000, 2, errors=(1500,))])]
    result = fit(
        FitRequest(messages=messages, budget=budget, counter=COUNTER, policy=Policy(recall=True))
    )
    plain = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER))
    assert count_prompt(COUNTER, result.messages) <= budget
    out = result.messages[-1]["content"]
    first = out.split("\n", 1)[0]
    assert first.startswith(CUT_MARK) and re.search(r"; recall: r[0-9]{15}\]$", first)
    assert "FAILED tests/test_mod1500.py::test_case_1500 " in out
    mine, theirs = COUNTER.message(result.messages[-1]), COUNTER.message(plain.messages[-1])
    assert abs(mine - theirs) <= 12


def test_a_room_for_the_markers_alone_keeps_the_markers_and_the_error_lines() -> None:
    """Below a head and a tail's room, an output is its marker and its error lines; below
    those, its marker and as many error lines as fit, the first and the last first; below
    its marker, it is not cut (the caller refuses)."""
    text = log(3000, 4, errors=(5, 1500, 2990))
    failed = [line for line in text.split("\n") if line.startswith("FAILED")]
    bare = least({"role": "tool", "tool_call_id": "c0", "content": text}, COUNTER)
    every = least({"role": "tool", "tool_call_id": "c0", "content": text}, COUNTER, errors=True)
    frame = COUNTER.message({"role": "tool", "tool_call_id": "c0", "content": ""})
    cut = cut_output(text, every - frame, COUNTER)
    assert cut is not None and cut.split("\n")[1:] == failed
    assert "every error line kept" in cut.split("\n", 1)[0]
    cut = cut_output(text, every - frame - 1, COUNTER)
    assert cut is not None and cut.split("\n")[1:] == [failed[0], failed[2]]
    assert "2 of its 3 error lines kept" in cut.split("\n", 1)[0]
    cut = cut_output(text, bare - frame, COUNTER)
    assert cut is not None and cut.split("\n")[1:] == []
    assert "0 of its 3 error lines kept" in cut
    assert cut_output(text, bare - frame - 1, COUNTER) is None


def test_what_a_cut_left_out_is_its_part_to_recall() -> None:
    """``cut_part``: the lines the gap line names, the characters of the one line, or, for a
    cut to its marker and error lines, the whole: with what the cut shows, the original."""
    text = log(3000, 6, errors=(1500,))
    cut = cut_output(text, 400, COUNTER)
    assert cut is not None
    lines = cut.split("\n")
    gap = next(k for k, line in enumerate(lines) if line.startswith("[... lines"))
    end = lines.index("[...]")
    part = cut_part(text, cut)
    assert part is not None and lines[gap + 1] in part  # the error line, in its place
    assert "\n".join([*lines[1:gap], part, *lines[end + 1 :]]) == text
    one = "".join(str(k) for k in range(20_000))  # one long line
    cut = cut_output(one, 300, COUNTER)
    assert cut is not None
    head, _, tail = cut.split("\n")[1:]
    assert head + (cut_part(one, cut) or "") + tail == one
    bare = cut_output(text, 60, COUNTER)
    assert bare is not None and cut_part(text, bare) == text
    assert cut_part(text, text) is None  # not a cut


def test_an_output_with_no_text_is_never_cut() -> None:
    shot = {"role": "tool", "tool_call_id": "c0", "content": None}
    assert cut_step([shot], [0], Aim(500), COUNTER) is None


MARKER = 50  # tokens, about, of a cut output's marker and frame: the rooms' scale


# The example a random search found when a recall handle was 12 hex digits (8-17 tokens):
# the floor priced one handle, the cut named another two tokens longer, and the error line
# was lost for them.
@example(sizes=[136, 5], extra=16, errors=1, seed=6, history=0, recall=True)
@settings(max_examples=400, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 200), min_size=1, max_size=5),
    extra=st.integers(0, 600),
    errors=st.integers(0, 3),
    seed=st.integers(0, 1000),
    history=st.integers(0, 3),
    recall=st.booleans(),
)
def test_no_refusal_while_the_markers_fit(
    sizes: list[int], extra: int, errors: int, seed: int, history: int, recall: bool
) -> None:
    """Newest steps of 1-5 calls, each output up to 20 times the room (``sizes`` in tenths of
    it), with up to three error lines, after ``history`` older steps, under recall or not; the
    room from what the instructions, the task, the calls and each output's bare marker take
    (``least``) to ``extra`` tokens an output more. Never refused; every call keeps its
    result; the prompt within its budget; every error line kept whenever the room holds each
    output's marker and error lines, and otherwise as many as the marker says, none made up."""
    rnd = random.Random(seed)
    n = len(sizes)
    scale = n * (MARKER + extra)
    outputs = []
    for k, tenths in enumerate(sizes):
        lines = max(2, scale * tenths // 10 // 14)  # about 14 tokens a line
        failing = tuple(sorted(rnd.sample(range(lines), min(errors, lines))))
        outputs.append(log(lines, seed + k, failing))
    older = [m for j in range(history) for m in step([words(200, seed + j)], 100 + j)]
    messages = [SYSTEM, TASK, *older, *step(outputs)]
    tail = messages[-n:]
    frame = count_prompt(COUNTER, [SYSTEM, TASK, messages[-n - 1]])
    sized = [(COUNTER.message(m), m) for m in tail]
    budget = frame + sum(min(size, least(m, COUNTER, recall)) for size, m in sized) + n * extra
    room_for_errors = frame + sum(min(size, least(m, COUNTER, recall, True)) for size, m in sized)
    result = fit(
        FitRequest(messages=messages, budget=budget, counter=COUNTER, policy=Policy(recall=recall))
    )  # never DoesNotFit
    kept = result.messages
    assert count_prompt(COUNTER, kept) <= budget
    assert pairs_whole(kept)
    assert_newest_step_kept(messages, kept, len(messages) - n - 1, cut=True)
    for original, mine in zip(outputs, kept[-n:], strict=True):
        shown = mine["content"]
        if shown == original:
            continue
        first = shown.split("\n", 1)[0]
        assert first.startswith(CUT_MARK)
        assert ("recall: r" in first) is recall
        failed = [line for line in original.split("\n") if line.startswith("FAILED")]
        kept_lines = [line for line in shown.split("\n") if line.startswith("FAILED")]
        assert set(kept_lines) <= set(failed)
        if budget >= room_for_errors:
            assert set(kept_lines) == set(failed)
        if len(set(kept_lines)) < len(failed):
            assert f"{len(kept_lines)} of its {len(failed)} error lines kept" in first


def test_a_room_too_small_for_every_error_line_says_how_many_it_kept() -> None:
    errors = tuple(range(10, 1000, 50))
    text = log(1000, 3, errors)
    cut = cut_output(text, 200, COUNTER)
    assert cut is not None
    first = cut.split("\n", 1)[0]
    shown = sum(1 for line in cut.split("\n") if line.startswith("FAILED"))
    assert 0 < shown < len(errors)
    assert f"{shown} of its {len(errors)} error lines kept" in first
    assert "test_case_10 " in cut and "test_case_960 " in cut  # the first and the last


def test_a_json_wrapped_output_is_cut_by_its_escaped_lines() -> None:
    """Codex's exec results: one JSON document whose ``output`` string holds the command's
    lines as escaped newlines; the error line among them is kept whole."""
    text = log(3000, 5, errors=(1500,))
    wrapped = orjson.dumps({"exit_code": 1, "output": text}).decode()
    assert "\n" not in wrapped
    cut = cut_output(wrapped, 600, COUNTER)
    assert cut is not None and "every error line kept" in cut.split("\n", 1)[0]
    assert "FAILED tests/test_mod1500.py::test_case_1500 - AssertionError: 1500 != 0" in cut
    # counted in the command's lines, not as characters of one long line
    assert re.search(r"\[\.\.\. lines \d+-[\d,]+ cut \([\d,]+ lines\)", cut)


def test_a_test_runners_own_failure_lines_are_kept() -> None:
    """pytest -v, unittest, TAP: the failure lines in the runners' own words."""
    lines = [f"tests/test_m.py::test_{k} PASSED [{k // 50:3d}%]" for k in range(5000)]
    lines[2500] = "tests/test_m.py::test_2500 FAILED [ 50%]"
    lines[3100] = "not ok 3100 - parses the header"
    cut = cut_output("\n".join(lines), 400, COUNTER)
    assert cut is not None and "every error line kept" in cut.split("\n", 1)[0]
    assert lines[2500] in cut and lines[3100] in cut


def test_the_line_range_names_the_lines_cut() -> None:
    text = "\n".join(f"line {k + 1}" for k in range(1000))
    cut = cut_output(text, 120, COUNTER)
    assert cut is not None
    found = re.search(r"\[\.\.\. lines ([\d,]+)-([\d,]+) cut \(([\d,]+) lines\)", cut)
    assert found is not None
    first, last, count = (int(g.replace(",", "")) for g in found.groups())
    kept = {int(x.split()[1]) for x in cut.split("\n") if x.startswith("line ")}
    assert first == max(k for k in kept if k < first) + 1  # the first line not kept
    assert last == min(k for k in kept if k > last) - 1  # the last line not kept
    assert count == last - first + 1


def test_a_large_task_and_one_large_step_share_the_cut() -> None:
    """A running task's statement of 4,000 words and one step whose output is as large: both
    are cut, neither to nothing (the output keeps its error line)."""
    task = {"role": "user", "content": "Start here. " + "context " * 4000 + "End: do it now."}
    newest = step([log(400, 7, errors=(200,))])
    messages = [SYSTEM, task, *newest]
    budget = 1500
    result = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True))
    kept = result.messages
    assert count_prompt(COUNTER, kept) <= budget
    assert "task_middle_cut" in result.actions
    assert any(a.startswith("step-outputs-cut") for a in result.actions)
    output = kept[-1]["content"]
    assert "test_case_200" in output
    assert COUNTER.message(kept[-1]) > 300  # at the task's level, not cut to its least


def test_one_long_line_with_an_error_word_is_cut_by_characters() -> None:
    """A minified JSON dump on one line that holds ``error:`` is no log line: it was kept whole
    or dropped whole (a 34k-token output cut to its marker alone, a 4k window left empty);
    now its head and tail are kept like any long line's."""
    rows = [{"id": i, "status": "passed"} for i in range(3000)]
    rows[2000] = {"id": 2000, "status": "failed", "message": "error: assertion failed"}
    text = orjson.dumps(rows).decode()
    cut = cut_output(text, 1_000, COUNTER)
    assert cut is not None and cut.startswith(OPENING)
    assert "characters of line 1 cut" in cut
    assert cut.split("\n")[1].startswith('[{"id":0,"status":"passed"}')
    assert 800 <= text_cost(COUNTER)(cut) <= 1_000
