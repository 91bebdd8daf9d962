"""After an agent compacts its own history it puts its summary back as a user message (Codex:
"Another language model started to solve this problem ..."), after the user's own messages,
which it keeps. Taken for the task, that summary made the real task history: through the proxy
the task was dropped from 49 of Codex's 101 requests at 16k (101 of 101 without it). The task
is the user's own message; the summary is history; with no user message of its own left
(Claude Code replaces all of it) the summary stands for the task."""

from __future__ import annotations

from typing import Any

from strategies.client_summaries import asks_compaction, is_client_summary
from strategies.engine import FitRequest, fit
from strategies.rules import running_task
from strategies.tokens import count_prompt
from tests.strategies.test_running_task import COUNTER, TASK, loop

CODEX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by that "
    "language model. Here is the summary: read files 0-9; the parser fails on empty input."
)
CLAUDE = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation. Summary: ..."
)


def compacted(summary: str, steps: int) -> list[dict[str, Any]]:
    """Codex's history after its own compaction: the instructions, the user's task, the
    summary, then the steps since."""
    out = loop(steps)
    out.insert(2, {"role": "user", "content": [{"type": "text", "text": summary}]})
    return out


def test_the_summary_is_not_the_task() -> None:
    messages = compacted(CODEX, 5)
    assert is_client_summary(messages[2]) and not is_client_summary(TASK)
    assert running_task(messages, 1)[0] == 1


def test_without_a_task_of_its_own_the_summary_stands_for_it() -> None:
    messages = [m for m in compacted(CLAUDE, 5) if m is not TASK]
    assert running_task(messages, 1)[0] == 1  # the summary, now the first user message


def test_a_trimmed_compacted_task_keeps_the_task() -> None:
    messages = compacted(CODEX, 40)
    budget = count_prompt(COUNTER, messages) // 8
    kept = fit(
        FitRequest(messages=messages, budget=budget, counter=COUNTER, atomic_current=True)
    ).messages
    assert any(m is TASK for m in kept)  # the user's task, as sent
    assert count_prompt(COUNTER, kept) <= budget


PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary ..."


def test_a_compaction_request_keeps_the_task_and_is_known_as_one() -> None:
    messages = compacted(CODEX, 5)
    messages.append({"role": "user", "content": PROMPT})
    assert asks_compaction(messages) and not asks_compaction(loop(3))
    assert running_task(messages, 1)[0] == 1  # its prompt is not the task either
