"""``drop``: a block that does not fit is removed whole (documents worth keeping only whole)."""

from __future__ import annotations

from collections.abc import Sequence

from strategies.messages import Message
from strategies.tokens import Counter


class Drop:
    name = "drop"
    label = "dropped"

    def apply(
        self, messages: Sequence[Message], original_tokens: int, limit: int, counter: Counter
    ) -> list[Message]:
        return []
