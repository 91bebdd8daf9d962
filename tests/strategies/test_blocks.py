from __future__ import annotations

import pytest

from strategies.blocks import Block, compile_blocks
from strategies.drop import Drop
from strategies.errors import (
    BudgetExceeded,
    InvalidConfig,
    NilStrategy,
    StrategyExceededBudget,
    TokenCountFailed,
)
from strategies.rules import TIERS
from strategies.strict import Strict
from strategies.truncate_oldest import TruncateOldest
from tests.counters import FixedCounter


def msg(role: str, text: str = "x") -> dict[str, str]:
    return {"role": role, "content": text}


def history(n: int) -> list[dict[str, str]]:
    return [msg("user" if i % 2 == 0 else "assistant", str(i)) for i in range(n)]


def test_contexty_readme_example() -> None:
    # FixedCounter 50 per message, one system plus six history messages, budget 300.
    blocks = [
        Block(id="system", messages=[msg("system")], tier=TIERS["system"], strategy=Strict()),
        Block(id="history", messages=history(6), tier=TIERS["history"], strategy=TruncateOldest()),
    ]
    outputs, report = compile_blocks(blocks, 300, FixedCounter(50))
    assert sum(len(o) for o in outputs) == 6
    assert report.total_tokens_used == 300
    assert report.remaining_tokens == 0
    assert report.original_tokens == 350
    assert report.evictions == {"history": "truncated"}
    assert [m["content"] for m in outputs[1]] == ["1", "2", "3", "4", "5"]


def test_tier_order_decides_who_gets_the_budget_and_output_keeps_input_order() -> None:
    blocks = [
        Block(id="history", messages=history(4), tier=TIERS["history"], strategy=TruncateOldest()),
        Block(id="rag", messages=[msg("system", "doc")] * 2, tier=TIERS["rag"], strategy=Drop()),
        Block(id="system", messages=[msg("system")], tier=TIERS["system"], strategy=Strict()),
    ]
    outputs, report = compile_blocks(blocks, 200, FixedCounter(50))
    assert [len(o) for o in outputs] == [1, 2, 1]
    assert [b.id for b in report.blocks] == ["system", "rag", "history"]
    assert outputs[2] == [msg("system")]  # each block's output where the block was given


def test_drop_records_label_and_dropped_block() -> None:
    blocks = [
        Block(id="system", messages=[msg("system")], tier=TIERS["system"], strategy=Strict()),
        Block(id="rag", messages=[msg("system", "doc")] * 3, tier=TIERS["rag"], strategy=Drop()),
        Block(id="history", messages=history(2), tier=TIERS["history"], strategy=Strict()),
    ]
    outputs, report = compile_blocks(blocks, 150, FixedCounter(50))
    assert outputs[1] == []
    assert report.blocks_dropped == ["rag"]
    assert report.evictions == {"rag": "dropped"}
    assert report.total_tokens_used == 150


def test_per_block_cap_is_the_strategys_limit() -> None:
    blocks = [
        Block(
            id="history",
            messages=history(6),
            tier=TIERS["history"],
            strategy=TruncateOldest(),
            max_tokens=100,
        )
    ]
    outputs, report = compile_blocks(blocks, 1000, FixedCounter(50))
    assert len(outputs[0]) == 2
    assert report.remaining_tokens == 900


def test_strict_block_that_does_not_fit_is_rejected() -> None:
    blocks = [
        Block(id="system", messages=[msg("system")] * 3, tier=TIERS["system"], strategy=Strict())
    ]
    with pytest.raises(BudgetExceeded) as err:
        compile_blocks(blocks, 100, FixedCounter(50))
    assert err.value.block_id == "system"
    assert (err.value.tokens, err.value.limit) == (150, 100)


def test_errors_mirror_contexty() -> None:
    with pytest.raises(InvalidConfig):
        compile_blocks([], 0, FixedCounter(1))
    with pytest.raises(InvalidConfig):
        compile_blocks([], 10, None)
    with pytest.raises(NilStrategy):
        compile_blocks(
            [Block(id="b", messages=[msg("user")], tier=0, strategy=None)], 10, FixedCounter(1)
        )

    class Greedy:
        name = "greedy"
        label = "evicted"

        def apply(self, messages, original_tokens, limit, counter):  # type: ignore[no-untyped-def]
            return list(messages)

    with pytest.raises(StrategyExceededBudget):
        compile_blocks(
            [Block(id="b", messages=history(4), tier=3, strategy=Greedy())], 100, FixedCounter(50)
        )

    class Broken:
        priming = 0

        def message(self, message):  # type: ignore[no-untyped-def]
            raise RuntimeError("tokenizer down")

        def tools(self, tools, functions):  # type: ignore[no-untyped-def]
            return 0

    with pytest.raises(TokenCountFailed):
        compile_blocks(
            [Block(id="b", messages=history(1), tier=3, strategy=Strict())], 100, Broken()
        )


def test_empty_block_gets_no_report_entry() -> None:
    outputs, report = compile_blocks(
        [Block(id="empty", messages=[], tier=0, strategy=None)], 10, FixedCounter(1)
    )
    assert outputs == [[]]
    assert report.blocks == []
