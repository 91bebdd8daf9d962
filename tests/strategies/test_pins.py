"""Pinned messages survive every kind of eviction: truncation, passes, strict blocks."""

from __future__ import annotations

from typing import Any

from strategies.engine import FitRequest, Policy, fit
from strategies.rules import Match
from tests.counters import FixedCounter


def conversation(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for k in range(turns):
        out += [
            {"role": "user", "content": f"question {k}"},
            {"role": "assistant", "content": f"answer {k}"},
        ]
    return [*out, {"role": "user", "content": "now"}]


def test_a_pinned_message_is_kept_when_its_turn_is_cut() -> None:
    messages = conversation(20)
    rule = messages[3]
    result = fit(
        FitRequest(
            messages=messages,
            budget=12 * 10,
            counter=FixedCounter(10),
            pinned=frozenset({id(rule)}),
        )
    )
    assert rule in result.messages
    assert result.messages.index(rule) < result.messages.index(messages[-1])
    assert len(result.messages) < len(messages)


def test_policy_pins_match_by_content() -> None:
    messages = conversation(20)
    messages[5] = {"role": "user", "content": "RULE: never use tabs"}
    policy = Policy(pins=(Match(roles=("user",), content_regex=r"^RULE:"),))
    result = fit(
        FitRequest(messages=messages, budget=12 * 10, counter=FixedCounter(10), policy=policy)
    )
    assert messages[5] in result.messages  # the very object: verbatim


def test_passes_never_rewrite_a_pinned_message() -> None:
    from tests.counters import CharCounter

    long = "x " * 5000  # 10,000 characters: light_trim trims it when it is not pinned
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": long},
        {"role": "assistant", "content": "ok"},
        *[{"role": "user", "content": f"q{k}"} for k in range(6)],
    ]
    free = fit(FitRequest(messages=messages, budget=2000, counter=CharCounter()))
    assert "light_trim" in free.actions and messages[1] not in free.messages
    # Over budget by a few tokens: the passes run, and must leave the pinned message alone.
    pinned = fit(
        FitRequest(
            messages=messages,
            budget=2505,
            counter=CharCounter(),
            pinned=frozenset({id(messages[1])}),
        )
    )
    assert pinned.steps and pinned.tokens_after <= 2505
    assert pinned.messages[1] is messages[1]
