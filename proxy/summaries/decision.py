"""Whether to summarize: every rule that decides it, in one place.

    summarizes      does the request's policy summarize at all (or does it carry session memory)
    soft_limit      the soft threshold: past it, a summary is prepared before it is needed
    on_request      the planner's step for a request's count: compact now (over the budget),
                    prepare in the background (past the soft limit), or nothing
    choose          what a conversation's stored checkpoints offer: the one that matches, its
                    view when that fits, and whether the view is past the soft limit
    on_compact      over the budget: reuse a stored summary (and refresh it ahead of time), make
                    a new one, or truncate (a conversation seen for the first time)
    worth_preparing past the soft limit: whether to start a summary in the background now

Where a summary cuts is the engine's (strategies/checkpoints/chain.py: next_cut); making one is
job.py's; running it once per conversation, with a budget of calls and a breaker, compactor.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from proxy.config.policies import PolicyConfig
from strategies.checkpoints.chain import Checkpoint, apply_summary, best_checkpoint
from strategies.messages import Message
from strategies.tokens import Counter, count_prompt

Step = Literal["compact", "prepare", "none"]
Action = Literal["reuse", "reuse-and-refresh", "make", "truncate"]


def summarizes(
    config: PolicyConfig, session_memory: str | None = None, client_compaction: bool = False
) -> bool:
    """Whether a request may be summarized: its policy summarizes (or it carries session
    memory), and it is not a client's own compaction request (cut, never summarized: a summary
    of what it asks to have summarized lost how far the task went)."""
    return (config.summarize or bool(session_memory)) and not client_compaction


def soft_limit(budget: int, config: PolicyConfig) -> int:
    return int(budget * config.summarizer.soft_threshold)


def on_request(
    tokens: int,
    budget: int,
    config: PolicyConfig,
    session_memory: str | None = None,
    client_compaction: bool = False,
) -> Step:
    """What a request of ``tokens`` (against ``budget`` for messages) calls for."""
    if not summarizes(config, session_memory, client_compaction):
        return "none"
    if tokens > budget:
        return "compact"
    return "prepare" if tokens > soft_limit(budget, config) else "none"


@dataclass(frozen=True, slots=True)
class Choice:
    """What a conversation gets from its stored checkpoints (no I/O here).

    ``best`` is the checkpoint that matches this conversation, if any. When its view fits the
    budget, ``view`` is that view (reuse it, no LLM call) and ``refresh`` says whether the view
    is past the soft limit, so a newer checkpoint should be made ahead of time. Otherwise a new
    checkpoint is due, updating ``best``."""

    best: Checkpoint | None
    view: list[Message] | None = None
    refresh: bool = False


def choose(
    candidates: Sequence[Checkpoint],
    chain: Sequence[str],
    messages: Sequence[Message],
    budget: int,
    soft: int,
    counter: Counter,
    role: str = "user",
    keep: frozenset[int] = frozenset(),
) -> Choice:
    best = best_checkpoint(candidates, chain)
    if best is None:
        return Choice(None)
    view = apply_summary(messages, best.covers, best.texts(role), keep)
    tokens = count_prompt(counter, view)
    if tokens > budget:
        return Choice(best)
    return Choice(best, view, tokens > soft)


def first_sight_truncates(seen: bool, config: PolicyConfig) -> bool:
    """A conversation seen for the first time is truncated, not summarized: it may be a
    one-off, and if it comes back it is summarized then (unless ``summarize_unseen``)."""
    return not seen and not config.summarizer.summarize_unseen


def on_compact(choice: Choice, seen: Callable[[], bool], config: PolicyConfig) -> Action:
    """Over the budget: what to do with the conversation's checkpoints. ``seen`` is asked
    only when it matters (it remembers the conversation)."""
    if choice.view is not None and choice.best is not None:
        return "reuse-and-refresh" if choice.refresh else "reuse"
    if choice.best is None and first_sight_truncates(seen(), config):
        return "truncate"
    return "make"


def worth_preparing(choice: Choice, over_soft: Callable[[], bool]) -> bool:
    """Past the soft limit: a reusable view is refreshed only once it is past the soft limit
    itself; a stale checkpoint is updated; with none, a summary starts when the conversation
    itself is past the soft limit (``over_soft`` is asked only then)."""
    if choice.view is not None:
        return choice.refresh
    return choice.best is not None or over_soft()
