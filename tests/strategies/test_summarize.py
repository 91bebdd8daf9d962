from __future__ import annotations

from collections.abc import Sequence

from strategies.messages import Message
from strategies.summarize import Summarize
from tests.counters import CharCounter


class FixedSummary:
    def __init__(self, text: str) -> None:
        self.text = text
        self.seen: list[tuple[int, int]] = []

    def summarize(self, messages: Sequence[Message], limit: int) -> Message:
        self.seen.append((len(messages), limit))
        return {"role": "system", "content": self.text}


def test_summary_replaces_the_block() -> None:
    summarizer = FixedSummary("short")
    msgs = [{"role": "user", "content": "x" * 400}] * 4
    out = Summarize(summarizer).apply(msgs, 400, 50, CharCounter())
    assert out == [{"role": "system", "content": "short"}]
    assert summarizer.seen == [(4, 50)]
    assert Summarize.label == "summarized"


def test_summary_still_over_the_limit_drops_the_block() -> None:
    out = Summarize(FixedSummary("y" * 400)).apply(
        [{"role": "user", "content": "x"}], 1, 10, CharCounter()
    )
    assert out == []
