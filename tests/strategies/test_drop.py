from __future__ import annotations

from strategies.drop import Drop
from tests.counters import FixedCounter


def test_drop_removes_the_whole_block() -> None:
    msgs = [{"role": "system", "content": "doc"}] * 3
    assert Drop().apply(msgs, 30, 29, FixedCounter(10)) == []
    assert Drop.label == "dropped"
