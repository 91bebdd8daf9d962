"""The engine under policies: RAG blocks, agent loops, summaries, cache-friendly cuts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strategies.engine import FitRequest, Policy, fit
from strategies.messages import Message
from strategies.rules import TIERS, Match, Rule
from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.counters import FixedCounter
from tests.strategies.invariants import assert_tool_pairs_intact

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))

RAG_RULE = Rule(
    id="rag",
    match=Match(roles=("system",), content_regex=r"^<doc"),
    tier=TIERS["rag"],
    strategy="drop",
    inject_into_system="xml",
)
RAG_POLICY = Policy(rules=(RAG_RULE, *Policy().rules))


def rag_request(doc_words: int, turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You answer from the documents."},
        {"role": "system", "content": "<doc id=1>" + "alpha " * doc_words + "</doc>"},
        {"role": "system", "content": "<doc id=2>" + "beta " * doc_words + "</doc>"},
    ]
    for i in range(turns):
        msgs += [
            {"role": "user", "content": f"q{i} " * 30},
            {"role": "assistant", "content": f"a{i} " * 30},
        ]
    msgs.append({"role": "user", "content": "What do the documents say?"})
    return msgs


def test_rag_documents_are_injected_into_the_system_message_when_they_fit() -> None:
    msgs = rag_request(doc_words=40, turns=20)
    result = fit(FitRequest(messages=msgs, budget=700, counter=COUNTER, policy=RAG_POLICY))
    assert result.messages[0]["content"].startswith(
        "You answer from the documents.\n\n<context>\n  <fact>&lt;doc id=1&gt;"
    )
    assert not any(
        m["content"].startswith("<doc") for m in result.messages if isinstance(m["content"], str)
    )
    assert count_prompt(COUNTER, result.messages) <= 700
    assert result.report is not None
    assert result.report.evictions.get("rag") is None
    assert result.report.evictions["history"] == "truncated"


def test_rag_documents_are_dropped_whole_when_they_do_not_fit() -> None:
    msgs = rag_request(doc_words=400, turns=2)
    result = fit(FitRequest(messages=msgs, budget=500, counter=COUNTER, policy=RAG_POLICY))
    assert result.report is not None
    assert result.report.evictions["rag"] == "dropped"
    assert result.report.blocks_dropped == ["rag"]
    assert "alpha" not in str(result.messages)
    assert result.messages[-1] is msgs[-1]


def agent_request(loops: int, line: str = "code line\n") -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for i in range(loops):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "f{i}.py"}}'},
        }
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                # A repeated line: lossless re-encoding collapses it (distinct lines, with a
                # {j}, it cannot).
                "content": f"# file {i}\n" + "".join(line.format(j=j) for j in range(150)),
            },
        ]
    return msgs


def test_agent_loop_clears_old_tool_results_before_cutting_anything() -> None:
    msgs = agent_request(12, "code {j}\n")
    budget = count_prompt(COUNTER, msgs) // 2
    result = fit(FitRequest(messages=msgs, budget=budget, counter=COUNTER))
    # Lossless re-encoding runs first; distinct lines of code leave it nothing to do.
    assert [s.name for s in result.steps][:2] == ["lossless", "tool_result_microcompact"]
    assert not result.steps[0].applied
    assert result.steps[1].applied and result.steps[1].tokens_saved > 0
    assert "tool_result_microcompact" in result.actions
    assert len(result.messages) == len(msgs)  # nothing dropped: clearing was enough
    cleared = [
        m
        for m in result.messages
        if str(m.get("content")).startswith("[Tool result cleared to save context")
    ]
    assert len(cleared) == 7
    assert result.messages[1] is msgs[1]
    assert_tool_pairs_intact(result.messages)


def test_current_turn_alone_too_big_is_trimmed_turn_atomically() -> None:
    msgs = agent_request(12)
    result = fit(FitRequest(messages=msgs, budget=600, counter=COUNTER, policy=Policy(passes=())))
    assert result.messages[:2] == msgs[:2]
    assert result.messages[-1] is msgs[-1]
    assert count_prompt(COUNTER, result.messages) <= 600
    assert_tool_pairs_intact(result.messages)
    assert result.report is not None
    assert result.report.evictions == {"current": "truncated"}


class EchoSummarizer:
    """A test double: says how many messages it summarized."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, messages: Sequence[Message], limit: int) -> Message:
        self.calls += 1
        return {"role": "user", "content": f"<summary of {len(messages)} messages>"}


def test_summarize_strategy_replaces_history_in_place() -> None:
    msgs = rag_request(doc_words=0, turns=20)[0:1] + rag_request(doc_words=0, turns=20)[3:]
    summarizer = EchoSummarizer()
    policy = Policy(history_strategy="summarize", history_options={}, passes=())
    result = fit(
        FitRequest(messages=msgs, budget=300, counter=COUNTER, policy=policy, summarizer=summarizer)
    )
    assert summarizer.calls == 1
    assert result.messages[0] is msgs[0]
    assert result.messages[1] == {"role": "user", "content": "<summary of 40 messages>"}
    assert result.messages[2] is msgs[-1]
    assert result.actions == ["summarize"]


def test_custom_tiers_and_caps() -> None:
    scratch = Rule(
        id="scratch",
        match=Match(roles=("assistant",), position="history"),
        tier=7,
        strategy="truncate_oldest",
        max_tokens=20,
    )
    msgs = (
        [{"role": "system", "content": "s"}]
        + [{"role": r, "content": "x"} for r in ["user", "assistant"] * 5]
        + [{"role": "user", "content": "q"}]
    )
    result = fit(
        FitRequest(
            messages=msgs,
            budget=100,
            counter=FixedCounter(10),
            policy=Policy(rules=(*Policy().rules, scratch), cache_cut_share=0),
        )
    )
    assert result.report is not None
    by_id = {b.id: b for b in result.report.blocks}
    assert by_id["scratch"].tokens_after <= 20
    assert [b.id for b in result.report.blocks] == ["system", "newest", "history", "scratch"]


def test_growing_chat_keeps_its_prompt_prefix_between_cuts() -> None:
    """Over a growing chat, >= 80% of requests after the first cut forward a prompt that starts
    with the previous request's whole prompt (so the provider's prompt cache keeps hitting)."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    budget = 2000
    previous: list[dict[str, Any]] | None = None
    after_first_cut = stable = 0
    for turn in range(150):
        msgs.append({"role": "user", "content": f"Question {turn}: " + "words " * (20 + turn % 7)})
        result = fit(FitRequest(messages=msgs, budget=budget, counter=COUNTER))
        assert count_prompt(COUNTER, result.messages) <= budget
        if previous is not None and result.changed:
            after_first_cut += 1
            stable += result.messages[: len(previous)] == previous
        if result.changed or previous is not None:
            previous = list(result.messages)
        msgs.append(
            {"role": "assistant", "content": f"Answer {turn}: " + "reply " * (25 + turn % 5)}
        )
        if previous is not None:
            previous.append(msgs[-1])
    assert after_first_cut > 100
    assert stable / after_first_cut >= 0.8, f"only {stable}/{after_first_cut} kept the prefix"


def test_without_the_grid_every_request_slides_the_cut() -> None:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    cuts = set()
    for turn in range(60):
        msgs += [{"role": "user", "content": f"q{turn} " * 40}]
        result = fit(
            FitRequest(
                messages=msgs, budget=1500, counter=COUNTER, policy=Policy(cache_cut_share=0)
            )
        )
        if result.changed:
            cuts.add(id(result.messages[1]))
        msgs += [{"role": "assistant", "content": f"a{turn} " * 40}]
    assert len(cuts) > 30
