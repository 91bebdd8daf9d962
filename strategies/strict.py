"""``strict``: the block is kept whole or the request is rejected."""

from __future__ import annotations

from collections.abc import Sequence

from strategies.errors import BudgetExceeded
from strategies.messages import Message
from strategies.tokens import Counter


class Strict:
    name = "strict"
    label = "rejected"

    def apply(
        self, messages: Sequence[Message], original_tokens: int, limit: int, counter: Counter
    ) -> list[Message]:
        raise BudgetExceeded(
            f"block needs {original_tokens} tokens but only {limit} are left",
            tokens=original_tokens,
            limit=limit,
        )
