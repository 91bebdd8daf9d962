"""The engine's entry point: make a request's messages fit a token budget.

``fit`` splits the conversation into blocks (leading system/developer messages, history, the
current turn), allocates the budget across them and reassembles the survivors in their original
order. The budget covers the messages and the reply priming; tool definitions and the reply
reserve are taken off by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from strategies.blocks import Block, Report, Tier, compile_blocks
from strategies.errors import BudgetExceeded
from strategies.messages import Message, last_user_index, leading_count, units
from strategies.strict import Strict
from strategies.tokens import Counter, count_prompt
from strategies.truncate_oldest import TruncateOldest


@dataclass(slots=True)
class Fit:
    messages: list[Message]
    tokens_before: int
    tokens_after: int
    budget: int
    actions: list[str] = field(default_factory=list)
    report: Report | None = None

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def fit(messages: list[Message], budget: int, counter: Counter) -> Fit:
    """Return ``messages`` unchanged when they fit ``budget``, else the trimmed conversation.

    Raises :class:`strategies.errors.BudgetExceeded` when even the blocks that must be kept whole
    (system prompt, current turn) do not fit.
    """
    before = count_prompt(counter, messages)
    if before <= budget:
        return Fit(messages, before, before, budget)
    if budget <= counter.priming:
        raise BudgetExceeded(
            f"a budget of {budget} tokens leaves nothing for messages",
            block_id="request",
            tokens=before,
            limit=budget,
        )
    blocks = default_blocks(messages)
    outputs, report = compile_blocks(blocks, budget - counter.priming, counter)
    kept = [m for out in outputs for m in out]
    actions = sorted({b.strategy for b in report.blocks if b.label is not None})
    return Fit(kept, before, report.total_tokens_used + counter.priming, budget, actions, report)


def default_blocks(messages: Sequence[Message]) -> list[Block]:
    """System prefix (strict), history (oldest turns dropped first), current turn (strict)."""
    lead = leading_count(messages)
    current = current_turn_start(messages, lead)
    return [
        Block("system", list(messages[:lead]), Tier.SYSTEM, Strict()),
        Block("history", list(messages[lead:current]), Tier.HISTORY, TruncateOldest(unit="turn")),
        Block("current", list(messages[current:]), Tier.CORE, Strict()),
    ]


def current_turn_start(messages: Sequence[Message], lead: int) -> int:
    """Index where the current turn starts: the last user message, else the last unit."""
    last_user = last_user_index(messages)
    if last_user >= lead:
        return last_user
    tail = units(messages, lead)
    return tail[-1].start if tail else len(messages)
