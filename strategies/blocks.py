"""Blocks, tiers and the allocator (contexty's Compile loop).

Blocks are allocated in tier order (stable within a tier) against one budget. A block that fits is
taken unchanged; one that does not is handed to its strategy with the smaller of its own cap and
the remaining budget, and the strategy's output is re-counted and checked. Unlike contexty, the
caller gets each block's output back in *input* order, so a proxy can reassemble a conversation in
its original sequence while priorities still decide who gets the budget first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from strategies.base import Strategy
from strategies.errors import (
    BudgetExceeded,
    InvalidConfig,
    NilStrategy,
    StrategyExceededBudget,
    TokenCountFailed,
)
from strategies.messages import Message
from strategies.tokens import Counter, count_messages


@dataclass(slots=True, kw_only=True)
class Block:
    id: str
    messages: list[Message]
    tier: int
    strategy: Strategy | None
    max_tokens: int = 0


@dataclass(slots=True, kw_only=True)
class BlockReport:
    id: str
    tier: int
    strategy: str
    tokens_before: int
    tokens_after: int
    label: str | None = None


@dataclass(slots=True, kw_only=True)
class Report:
    max_tokens: int
    original_tokens: int = 0
    total_tokens_used: int = 0
    remaining_tokens: int = 0
    blocks: list[BlockReport] = field(default_factory=list)
    blocks_dropped: list[str] = field(default_factory=list)

    @property
    def evictions(self) -> dict[str, str]:
        return {b.id: b.label for b in self.blocks if b.label is not None}


def compile_blocks(
    blocks: Sequence[Block], max_tokens: int, counter: Counter | None
) -> tuple[list[list[Message]], Report]:
    """Allocate ``max_tokens`` across ``blocks``; returns each block's output in input order."""
    if max_tokens <= 0 or counter is None:
        raise InvalidConfig(f"max_tokens must be positive and a counter given (got {max_tokens})")
    report = Report(max_tokens=max_tokens)
    outputs: list[list[Message]] = [[] for _ in blocks]
    remaining = max_tokens
    for index in sorted(range(len(blocks)), key=lambda i: blocks[i].tier):
        block = blocks[index]
        if not block.messages:
            continue
        if block.strategy is None:
            raise NilStrategy(f"block {block.id!r} has no strategy")
        outputs[index], used = _allocate(block, remaining, counter, report)
        remaining -= used
    report.total_tokens_used = max_tokens - remaining
    report.remaining_tokens = remaining
    return outputs, report


def _allocate(
    block: Block, remaining: int, counter: Counter, report: Report
) -> tuple[list[Message], int]:
    assert block.strategy is not None
    tokens = _count(counter, block.messages, block.id)
    report.original_tokens += tokens
    limit = block.max_tokens if 0 < block.max_tokens < remaining else remaining
    name = getattr(block.strategy, "name", type(block.strategy).__name__)
    entry = BlockReport(
        id=block.id, tier=block.tier, strategy=name, tokens_before=tokens, tokens_after=tokens
    )
    report.blocks.append(entry)
    if tokens <= limit:
        return block.messages, tokens
    entry.label = getattr(block.strategy, "label", None) or "evicted"
    try:
        out = block.strategy.apply(block.messages, tokens, limit, counter)
    except BudgetExceeded as exc:
        exc.block_id = exc.block_id or block.id
        raise
    if not out:
        entry.tokens_after = 0
        report.blocks_dropped.append(block.id)
        return [], 0
    used = _count(counter, out, block.id)
    entry.tokens_after = used
    if used > remaining:
        raise StrategyExceededBudget(
            f"strategy {name!r} left block {block.id!r} at {used} tokens, "
            f"over the {remaining} remaining",
            block.id,
            used,
            remaining,
        )
    return out, used


def _count(counter: Counter, messages: Sequence[Message], block_id: str) -> int:
    try:
        return count_messages(counter, messages)
    except Exception as exc:  # a user-supplied counter may fail in any way
        raise TokenCountFailed(f"counting block {block_id!r} failed: {exc}") from exc
