from __future__ import annotations

import pytest

from strategies.errors import BudgetExceeded
from strategies.strict import Strict
from tests.counters import FixedCounter


def test_strict_rejects_with_the_numbers() -> None:
    msgs = [{"role": "system", "content": "x"}] * 3
    with pytest.raises(BudgetExceeded) as err:
        Strict().apply(msgs, 30, 20, FixedCounter(10))
    assert (err.value.tokens, err.value.limit) == (30, 20)
    assert Strict.label == "rejected"
