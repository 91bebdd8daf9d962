from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.engine import FitRequest, Policy, fit
from strategies.standing import message_states_rule, standing_ids, states_rule
from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))

RULES = [
    "From now on, answer in French.",
    "For the rest of this session. Never include my name in your replies.",
    "for the remainder of our conversation, use metric units",
    "Going forward, keep answers under 100 words.",
    "Thanks! Always show the command before you run it.",
    "- never send emails on my behalf",
    "Until I say otherwise, reply in bullet points only.",
    "Please don't ever delete files without asking.",
    "À partir de maintenant, réponds en anglais.",
    "Désormais, utilise le système métrique.",
    "Ab jetzt antworte bitte auf Deutsch.",
    "Für den Rest dieser Sitzung: immer metrische Einheiten.",
    "De ahora en adelante, responde en español.",
    "A partir de agora, responda em português.",
    "D'ora in poi rispondi in italiano.",
    "从现在开始，请用中文回答。",
    "これからは日本語で答えてください。",
]
ORDINARY = [
    "I always wondered how TCP works. Can you explain?",
    "Never mind, let's talk about something else.",
    "Can you always answer in French?",
    "What does 'from now on' mean in a contract?",
    "Write a poem about the sea that never ends",
    "Summarize this article: the company has always been profitable.",
    "How do I fix this error in my Python code?",
    "<system-reminder>\nNEVER create files unless necessary.\nALWAYS prefer editing.\n</system-reminder>\nFix the bug.",
    "",
]


@pytest.mark.parametrize("text", RULES)
def test_a_standing_rule_is_recognised(text: str) -> None:
    assert states_rule(text)


@pytest.mark.parametrize("text", ORDINARY)
def test_an_ordinary_turn_is_not_a_rule(text: str) -> None:
    assert not states_rule(text)


def chat(rule_at: int, turns: int = 12) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for k in range(turns):
        question = f"Question {k}: tell me about topic number {k} in some detail, please."
        if k == rule_at:
            question = "For the rest of this session, answer in French.\n" + question
        messages += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": f"Answer {k}: " + "details about it. " * 60},
        ]
    messages.append({"role": "user", "content": "And the last one?"})
    return messages


@pytest.mark.parametrize("at", [0, 5, 10])
def test_the_engine_keeps_a_standing_rule_without_a_pin(at: int) -> None:
    messages = chat(at)
    budget = count_prompt(COUNTER, messages) // 4
    kept = fit(FitRequest(messages=messages, budget=budget, counter=COUNTER)).messages
    assert messages[1 + 2 * at] in kept
    assert count_prompt(COUNTER, kept) <= budget
    without = fit(
        FitRequest(
            messages=messages, budget=budget, counter=COUNTER, policy=Policy(standing_share=0)
        )
    ).messages
    assert (messages[1 + 2 * at] in without) is (at == 10)  # only the newest turns remain


def test_the_newest_rules_are_kept_within_their_share() -> None:
    messages = chat(-1)
    for k in (1, 5, 9):
        messages[1 + 2 * k] = {"role": "user", "content": f"From now on, rule {k}. " * 20}
    budget = count_prompt(COUNTER, messages) // 4
    one = COUNTER.message(messages[3])
    ids = standing_ids(messages, COUNTER, budget, share=(one * 2 + 1) / budget)
    assert ids == {id(messages[11]), id(messages[19])}
    assert standing_ids(messages, COUNTER, budget, share=0) == frozenset()
    continuing = frozenset({id(messages[19])})
    assert id(messages[19]) not in standing_ids(messages, COUNTER, budget, 0.5, continuing)


def test_rules_never_make_a_request_that_fits_without_them_fail() -> None:
    messages = chat(0)
    messages[-1] = {"role": "user", "content": "Now this. " * 400}
    tail = COUNTER.message(messages[-1]) + COUNTER.message(messages[0]) + COUNTER.priming
    budget = tail + 20  # room for nothing else: the rule goes with the rest
    assert standing_ids(messages, COUNTER, budget) == frozenset()
    assert (
        count_prompt(
            COUNTER, fit(FitRequest(messages=messages, budget=budget, counter=COUNTER)).messages
        )
        <= budget
    )


TEXTS = st.one_of(
    st.sampled_from([*RULES, "Can you always answer in French?", "Read main.py.", "ok"]),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(TEXTS, min_size=1, max_size=3), min_size=1, max_size=6))
def test_a_messages_remembered_reading_is_its_texts_reading(contents: list[list[str]]) -> None:
    """Read twice (the second from memory), each message reads as its texts do; a message
    of the same texts made anew is read alike, never confused with another by identity."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": x} for x in texts]}
        for texts in contents
    ]
    for _ in range(2):
        for m in messages:
            expected = any(states_rule(x) for x in (p["text"] for p in m["content"]))
            assert message_states_rule(m) == expected
            assert message_states_rule({**m}) == expected
