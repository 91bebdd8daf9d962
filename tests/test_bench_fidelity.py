"""The fidelity bench's own mechanics (bench/fidelity.py): its cases are honest, its judge
counts a replaced decision only with its replacement, and on a tiny run the controls score
as they must. Nothing here is about the proxy's own score."""

from __future__ import annotations

from dataclasses import replace

import pytest
from compactbench.contracts import EvaluationItem, EvaluationItemType
from compactbench.dsl import DifficultyLevel

from bench.fidelity import (
    EMPTY,
    NOTHING,
    TRUNCATE,
    empty_artifact,
    judge,
    make_jobs,
    run_arm,
    tally,
    truncate_last_n,
)
from bench.fidelity_cases import Case, cases, count, needle_case, problems, templates

QUEUE = EvaluationItem(
    key="queue",
    item_type=EvaluationItemType.LOCKED_DECISION_RETENTION,
    prompt="Which queue?",
    expected={"check": "contains_normalized", "value": "Redis Streams", "replaces": "RabbitMQ"},
)
OWNER = EvaluationItem(
    key="owner",
    item_type=EvaluationItemType.ENTITY_INTEGRITY,
    prompt="Who owns billing?",
    expected={"check": "set_match", "values": ["Priya owns billing", "Marco owns auth"]},
)
SYSTEM = {"role": "system", "content": "You are helpful."}
FIRST = {"role": "user", "content": "For the queue, let's go with RabbitMQ."}
SECOND = {"role": "user", "content": "Actually, let's switch to Redis Streams instead."}


def _case(*messages: dict[str, str]) -> Case:
    return Case(
        case_id="handmade",
        family="decision_override",
        messages=[SYSTEM, *messages],
        stating=frozenset(range(1, len(messages) + 1)),
        items=[QUEUE, OWNER],
        seed=1,
    )


def test_a_replaced_decision_counts_only_with_its_replacement() -> None:
    case = _case(FIRST, SECOND)
    # CompactBench's weights: a locked decision 3, an entity 1.
    assert judge(case, [SYSTEM, FIRST]) == (0.0, 1, 1)
    assert judge(case, [SYSTEM, FIRST, SECOND]) == (3 / 4, 0, 1)
    assert judge(case, [SYSTEM, SECOND]) == (3 / 4, 0, 1)
    assert judge(case, [SYSTEM]) == (0.0, 0, 1)
    half = {"role": "user", "content": "Also, priya   OWNS billing."}  # normalized; half the set
    assert judge(case, [SYSTEM, FIRST, half]) == (0.5 / 4, 1, 1)


def test_controls_keep_what_they_say() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    sent = [
        SYSTEM,
        {"role": "user", "content": "one " * 200},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "files " * 50},
        {"role": "user", "content": "two"},
    ]
    budget = count([SYSTEM, *sent[3:]])
    assert truncate_last_n(sent, budget) == [SYSTEM, sent[4]]  # no result without its call
    assert truncate_last_n(sent, 10**6) == sent
    assert empty_artifact(sent) == [SYSTEM, sent[4]]


def test_every_template_gives_honest_cases_at_hard_and_elite() -> None:
    assert {t.family for t in templates()} == {
        "buried_constraint",
        "decision_override",
        "entity_confusion",
        "reference_resolution",
    }
    made = cases(seeds=1, levels=(DifficultyLevel.HARD, DifficultyLevel.ELITE), per_family=None)
    assert len(made) == 2 * len(templates()) + 2 * 3
    for case in made:
        assert problems(case) == []
        assert 2000 <= count(case.messages) <= 5000, case.case_id
        assert case.messages[-1]["role"] == "assistant"


def test_a_needle_in_a_filler_turn_is_a_problem() -> None:
    case = needle_case(1, DifficultyLevel.HARD)
    value = case.items[0].expected["value"]
    leaked = [*case.messages, {"role": "user", "content": f"unrelated, but {value}"}]
    assert problems(replace(case, messages=leaked))


@pytest.mark.slow
def test_a_tiny_run_scores_the_controls_as_they_must() -> None:
    made = cases(seeds=1, levels=(DifficultyLevel.HARD,), per_family=1)
    chosen = [c for c in made if c.family in ("decision_override", "multi_needle")]
    jobs = make_jobs(chosen)
    runs = run_arm(jobs)
    assert all(set(points) == {2, 3} for points in runs), "every conversation is cut 3 times"
    for job, points in zip(jobs, runs, strict=True):
        for cycle, point in points.items():
            assert point.forwarded != point.sent
            # Untrimmed, every item is found once it was said: always so at a budget of half
            # the conversation (its first cut comes after its first third, where all is said).
            said = len(point.sent) > max(job.case.stating)
            assert said or job.share == "1/3", (job.case.case_id, job.share, cycle)
            if said:
                assert judge(job.case, point.sent)[0] == 1.0, (job.case.case_id, cycle)
    results = tally(jobs, {NOTHING: runs})
    for family in ("decision_override", "multi_needle"):
        for cycle in (2, 3):
            empty = results[(family, EMPTY)].scores
            assert all(s.kept <= 0.5 for s in empty[(cycle, "1/3")] + empty[(cycle, "1/2")])
            truncated = results[(family, TRUNCATE)].scores[(cycle, "1/2")]
            assert all(0 < s.compression < 1 for s in truncated)


@pytest.mark.slow
def test_what_the_proxy_keeps_when_its_summarizer_remembers_nothing() -> None:
    """The floor the ledger holds (strategies/ledger.py), on one case of each family: with a
    summarizer whose summaries say nothing, the forwarded requests still show at least 0.85 of
    the weighted items over the 2nd and 3rd cuts, 0.3 more than truncation on the same budget,
    and never a replaced decision without its replacement. (Over all points: under a loaded
    machine a background summary may race a request, and one point may move.)"""
    jobs = make_jobs(cases(seeds=1, levels=(DifficultyLevel.HARD,), per_family=1))
    results = tally(jobs, {NOTHING: run_arm(jobs)})
    families = {job.case.family for job in jobs}
    ours = [s for f in families for ss in results[(f, NOTHING)].scores.values() for s in ss]
    theirs = [s for f in families for ss in results[(f, TRUNCATE)].scores.values() for s in ss]
    kept = sum(s.kept for s in ours) / len(ours)
    truncated = sum(s.kept for s in theirs) / len(theirs)
    assert kept >= 0.85 and kept >= truncated + 0.3, (kept, truncated)
    assert not any(s.replaced_alone for s in ours)
