from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.ledger import (
    DECISION,
    ERROR,
    FACT,
    REPLACED,
    RULE,
    TASK,
    extract,
    fitted,
    read_output,
    read_user,
    removed_indices,
    render,
)
from strategies.tokens import ChatCounter
from tests.conftest import O200K

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    fn = {"name": name, "arguments": arguments}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "function": fn}]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


@pytest.mark.parametrize(
    "text",
    [
        "One hard rule: never disable CSRF tokens in this project.",
        "It's critical that we keep p99 latency under 20 ms.",
        "We must not store raw card numbers.",
        "Please make sure every migration is reversible.",
        "Do not use tabs in the YAML files.",
        "The export must stay under 50 MB, treat that as absolute.",
        "Never ever push to main directly.",
    ],
)
def test_rules_are_read_in_any_sentence_position(text: str) -> None:
    assert read_user(text) == [(RULE, text)]


@pytest.mark.parametrize(
    "text",
    [
        "When you finish a task, end your reply with a one-line summary of what you did.",
        "Before you answer, restate my question in one sentence in your own words.",
        "When you recommend papers, pick arXiv ones over peer-reviewed venues.",
        "Before you run a command, send a message, or make a change, show me what you're "
        "about to do and wait for my go-ahead.",
        "Write every number in your replies as an English word, not as digits.",
        "Reply in bullet points only, no paragraphs.",
    ],
)
def test_instructions_said_bare_are_rules(text: str) -> None:
    """conpact's side constraints without "must" or "never" (bench/rules.py): 6 of its 15
    were read as rules, 3 not at all; now all 15 are (bench/ledger_reads.py)."""
    assert (RULE, text) in read_user(text)


PASTED = (
    "Here is the article I mentioned, for context. Contemporary managers must wrestle with "
    "problems, attend seemingly endless meetings and make and take telephone calls. It is "
    "crucial for the firm to build its resources, and critically, its competitors never "
    "rest. Instead, the best of them preach a gospel of curiosity and resilience, and the "
    "board approved the plan on Monday. A leading manufacturer identified the penetration "
    "of electric vehicles as a critical factor. They are generally minor faults and do not "
    "stop the project from reaching completion. At least one supplier decided to switch to "
    "rail instead of trucks, rather than pay the new tolls. "
) * 2


def test_prose_pasted_in_is_not_read_as_rules_or_decisions() -> None:
    """A long message's third-person prose is the document the user pasted, not a rule or a
    decision of theirs; the instruction beside it still is."""
    assert len(PASTED) > 600
    read = read_user(PASTED)
    assert not [s for kind, s in read if kind in (RULE, DECISION)], read
    ask = "Please make sure every bullet of the summary cites its paragraph."
    assert (RULE, ask) in read_user(PASTED + ask)
    assert read_user("We must not store raw card numbers.") == [
        (RULE, "We must not store raw card numbers.")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I don't know much about gardening.",
        "I've never been to Lisbon.",
        "By the way, how long have you been working with me today?",
        "Random thought: do you have opinions on coffee versus tea?",
        "Question 0: tell me about tokens tell me about tokens",
        "I was thinking about lunch earlier.",
    ],
)
def test_small_talk_and_questions_are_not_read(text: str) -> None:
    assert read_user(text) == []


def test_facts_decisions_and_their_overrides() -> None:
    messages = [
        {"role": "system", "content": "You are helpful."},
        user("Let's plan the auth rewrite with Aditya."),
        assistant("Sure."),
        user("We'll use PostgreSQL 15 for the session store. Priya owns billing; Marco owns auth."),
        assistant("Noted."),
        user("Actually, switch the session store to Redis instead of PostgreSQL."),
        user("What next?"),
    ]
    entries = extract(messages, removed_indices(messages, [messages[0], messages[-1]]))
    kinds = [(e.kind, e.text, e.replaced) for e in entries]
    assert kinds == [
        (TASK, "Let's plan the auth rewrite with Aditya.", False),
        (DECISION, "We'll use PostgreSQL 15 for the session store.", True),
        (FACT, "Priya owns billing; Marco owns auth.", False),
        (DECISION, "Actually, switch the session store to Redis instead of PostgreSQL.", False),
    ]
    text = render(entries)
    assert text.index("PostgreSQL 15") < text.index("switch the session store")
    assert f"{REPLACED}We'll use PostgreSQL 15" in text


def test_tool_errors_files_and_fact_shaped_output_sentences() -> None:
    messages = [
        user("Fix the login test."),
        call("c1", "read_file", '{"path": "src/auth.py"}'),
        result("c1", "Notes. The special project code for Aurora is AUR-4521. More notes."),
        call("c2", "bash", '{"command": "pytest"}'),
        result("c2", "FAILED tests/test_auth.py::test_login - AssertionError\n1 failed, 3 passed"),
        call("c3", "bash", '{"command": "pytest"}'),
        result("c3", "4 passed in 0.3s"),
        call("c4", "edit", '{"path": "src/login.py"}'),
        result("c4", "ok"),
    ]
    entries = extract(messages, range(len(messages)))
    by_kind = {e.kind: e.text for e in entries}
    assert by_kind[FACT] == "The special project code for Aurora is AUR-4521."
    assert by_kind[ERROR].startswith('bash {"command": "pytest"}: FAILED tests/test_auth.py')
    assert by_kind[ERROR].endswith("(a later run succeeded)")
    assert by_kind["read"] == "src/auth.py" and by_kind["changed"] == "src/login.py"
    assert read_output("x = 1\nfor i in range(3): print(i)") == []


def test_the_same_removed_messages_give_the_same_bytes() -> None:
    messages = [user("Hard rule: never log tokens."), assistant("ok"), user("Next, the cache.")]
    first = fitted(extract(messages, [0, 1]), 500, COUNTER)
    copy = [dict(m) for m in messages]  # equal messages, other objects
    assert first is not None and first == fitted(extract(copy, [0, 1]), 500, COUNTER)


def test_reading_stops_at_the_scan_bound_the_oldest_read_first() -> None:
    """Past ``scan_chars`` of user and tool text the messages are not read (the task still
    is): a body of the largest admitted size is not read whole, and the bound is a function
    of the messages alone (the same cut, the same bytes)."""
    filler = "the quick brown fox jumps over the lazy dog " * 10
    messages = [
        user("Migrate the billing service to the new queue."),
        user("Hard rule: never log card numbers."),
        *[user(filler) for _ in range(5)],
        user("We decided to go with Kafka for the queue."),
    ]
    every = range(len(messages))
    whole = {e.kind for e in extract(messages, every)}
    assert {TASK, RULE, DECISION} <= whole
    bounded = extract(messages, every, scan_chars=len(filler) * 3)
    assert {e.kind for e in bounded} == {TASK, RULE}
    copy = [dict(m) for m in messages]
    assert bounded == extract(copy, every, scan_chars=len(filler) * 3)


SUBJECTS = ["the datastore", "the queue", "the cache", "the CI runner", "the region"]
CHOICES = ["PostgreSQL", "MySQL", "Redis", "Kafka", "SQS", "GitHub Actions", "eu-west-1"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(CHOICES), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=0, max_value=400),
)
def test_a_replaced_decision_is_never_shown_without_its_replacement(
    decisions: list[tuple[str, str, bool]], cap: int
) -> None:
    """Under any cap: the ledger fits it, and every decision shown as replaced comes with a
    later decision on its subject that is shown too."""
    messages = [user("Let's set up the service.")]
    for subject, choice, override in decisions:
        said = (
            f"Actually, switch {subject} to {choice} instead."
            if override
            else f"We'll use {choice} for {subject}."
        )
        messages += [user(said), assistant("Noted.")]
    entries = extract(messages, range(len(messages)))
    text = fitted(entries, cap, COUNTER)
    if text is None:
        return
    assert COUNTER.message({"role": "user", "content": text}) <= cap
    for old in (e for e in entries if e.replaced and f"- {REPLACED}{e.text}" in text):
        subject = next(s for s in SUBJECTS if s in old.text)
        assert any(e.at > old.at and subject in e.text and f"- {e.text}" in text for e in entries)


def test_a_long_task_with_many_entries_keeps_what_fits_beside_it() -> None:
    """The search for what fits never ends with nothing but the task when more fits."""
    task = "We are migrating the billing service. " * 12
    messages = [user(task)]
    for k in range(40):
        messages += [user(f"Hard rule {k}: never touch table t{k}."), assistant("ok")]
    entries = extract(messages, range(len(messages)))
    for cap in (200, 300, 600):
        text = fitted(entries, cap, COUNTER)
        assert text is not None
        assert "Hard rule 0: never touch table t0." in text
        assert COUNTER.message({"role": "user", "content": text}) <= cap


@pytest.mark.parametrize("opening", ["Task: ", "TASK - ", "**Task:** ", "task — "])
def test_a_task_the_user_labelled_is_not_labelled_twice(opening: str) -> None:
    messages = [
        user(f"{opening}migrate the billing jobs to the new queue."),
        assistant("On it."),
        user("What next?"),
    ]
    text = render(extract(messages, removed_indices(messages, [messages[-1]])))
    assert "Task: migrate the billing jobs to the new queue." in text
    assert text.lower().count("task") == 1


def test_a_clients_context_message_is_not_the_task() -> None:
    """Codex opens every session with a user message that is wholly its <environment_context>
    (cwd, shell): a user's try found the ledger quoting it as the task."""
    context = (
        "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"
    )
    messages = [
        user(context),
        user("Migrate the billing jobs to the new queue."),
        assistant("On it."),
        user("What next?"),
    ]
    text = render(extract(messages, removed_indices(messages, [messages[-1]])))
    assert "Task: Migrate the billing jobs to the new queue." in text
    assert "Task: <environment_context>" not in text


def test_a_value_that_changed_outlasts_the_one_it_replaced() -> None:
    """The fidelity bench's first-sight arm showed "branch cut on 2024-08-12" without "the
    branch cut is now 2024-02-25" (2 of 96): both were read as facts, and a tight ledger sheds
    the newest fact first. A change said as a fact is a decision that overrides."""
    update = "And the date slipped: the branch cut is now 2024-02-25."
    assert read_user(update) == [(DECISION, update)]
    messages = [user("We cut the release branch on 2024-08-12, Wen runs the release.")]
    for k in range(30):
        messages += [assistant("ok"), user(f"Service s{k} runs on host h{k}.example.com.")]
    messages += [assistant("ok"), user(update), assistant("ok")]
    entries = extract(messages, range(len(messages)))
    whole = COUNTER.message({"role": "user", "content": render(entries)})
    text = fitted(entries, whole // 3, COUNTER)
    assert text is not None and "2024-02-25" in text
    assert "host h29" not in text  # the newest facts went; the change did not
