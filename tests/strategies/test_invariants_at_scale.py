"""The engine's invariants over 10,000 generated conversations, budgets and policies."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies.engine import FitRequest, Policy, fit
from strategies.errors import DoesNotFit
from strategies.light_trim import LightTrim
from strategies.microcompact import ToolResultMicrocompact
from strategies.rules import TIERS, Match, Rule
from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.strategies.conversations import conversation
from tests.strategies.invariants import assert_kept_in_order, assert_tool_pairs_intact

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))

POLICIES = [
    Policy(),
    Policy(cache_cut_share=0),
    Policy(history_strategy="middle_out", history_options={}),
    Policy(history_options={"unit": "pair"}, passes=()),
    Policy(history_options={"unit": "message", "min_messages": 2}, repair_tool_calls=True),
    Policy(
        passes=(
            LightTrim(keep_recent=1, text_threshold=200, preserve_head=50, preserve_tail=20),
            ToolResultMicrocompact(keep_recent=1),
        )
    ),
    Policy(
        rules=(
            Rule(
                id="tools",
                match=Match(roles=("assistant",), position="history"),
                tier=TIERS["scratchpad"],
                strategy="drop",
            ),
            *Policy().rules,
        )
    ),
]


@st.composite
def huge(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs = draw(conversation())
    if draw(st.booleans()):
        i = draw(st.integers(0, len(msgs) - 1))
        if isinstance(msgs[i].get("content"), str):
            msgs[i] = {
                **msgs[i],
                "content": msgs[i]["content"] + "长" * draw(st.integers(100, 6000)),
            }
    return msgs


# 10,000 conversations in all, shared evenly by the policies: one test per policy (each had
# a seventh of the examples when one test drew the policy), so a failure names its policy and
# the runs can go to several workers (pytest -n).
PER_POLICY = -(-10_000 // len(POLICIES))


@pytest.mark.slow
@pytest.mark.parametrize("which", range(len(POLICIES)))
@settings(
    max_examples=PER_POLICY, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
@given(msgs=huge(), budget=st.integers(10, 6000))
def test_invariants_hold_for_every_conversation_budget_and_policy(
    msgs: list[dict[str, Any]], budget: int, which: int
) -> None:
    policy = POLICIES[which]
    try:
        result = fit(FitRequest(messages=msgs, budget=budget, counter=COUNTER, policy=policy))
    except DoesNotFit:
        # Only when what must be kept cannot fit: the system prompt or the user's message.
        return
    out = result.messages
    assert count_prompt(COUNTER, out) <= budget
    assert_tool_pairs_intact(out)
    if not policy.repair_tool_calls:
        assert_kept_in_order(out, msgs)
    if msgs[0]["role"] == "system":
        assert out[0] is msgs[0], "the system block fits, so it is kept"
    users = [m for m in msgs if m["role"] == "user"]
    if users:
        assert any(m is users[-1] for m in out), "the last user message is kept"
    again = fit(FitRequest(messages=msgs, budget=budget, counter=COUNTER, policy=policy)).messages
    assert again == out, "the same input gives the same output"
