"""The summaries agents write of their own history and put back as a user message: Codex's
(its local compaction: "Another language model started to solve this problem ..."), Claude
Code's ("This session is being continued from a previous conversation ..."), and the proxy's own
(a compaction item or a checkpoint read back). Such a message is history the client compacted,
not the user stating a task: the running task stays the user's own message before it, which the
client keeps (Codex resends its user messages after every compaction), and the summary is never
taken for the task. Where no user message of its own is left (Claude Code replaces all of it),
the summary carries the task and stands for it."""

from __future__ import annotations

from collections.abc import Sequence

from strategies.checkpoints.cut import SUMMARY_HEADER
from strategies.messages import Message, iter_text

PREFIXES = (
    "Another language model started to solve this problem",  # Codex (codex-rs SUMMARY_PREFIX)
    "This session is being continued from a previous conversation",  # Claude Code
    SUMMARY_HEADER,  # the proxy's own
)


# The prompts an agent sends to have its own history summarized (the newest user message of its
# compaction request).
COMPACTION_PROMPTS = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION",  # Codex's local compaction
    "Your task is to create a detailed summary of the conversation so far",  # Claude Code's
)


def asks_compaction(messages: Sequence[Message]) -> bool:
    """Whether a request is an agent's compaction of its own history: its newest user
    message is a compaction prompt."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return last is not None and any(p in t for t in iter_text(last) for p in COMPACTION_PROMPTS)


def is_client_summary(message: Message) -> bool:
    """Whether a user message is an agent's summary of its own history, or its prompt asking
    for one: the agent's own words, never the task."""
    if message.get("role") != "user":
        return False
    first = next(iter_text(message), "")
    if first.lstrip().startswith(PREFIXES):
        return True
    return any(p in t for t in iter_text(message) for p in COMPACTION_PROMPTS)
