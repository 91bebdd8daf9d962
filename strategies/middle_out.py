"""``middle_out``: remove from the middle, keep the start and the end (OpenRouter's transform).

The beginning of a conversation usually states the task and the end holds the current work;
the middle is what a model attends to least. Units (an assistant ``tool_calls`` message with its
results) are removed whole, the one nearest the middle first.
"""

from __future__ import annotations

from collections.abc import Sequence

from strategies.messages import Message, units
from strategies.tokens import Counter


class MiddleOut:
    name = "middle_out"
    label = "truncated"

    def __init__(self, keep_first: int = 1, keep_last: int = 1) -> None:
        if keep_first < 0 or keep_last < 0:
            raise ValueError("keep_first and keep_last must be >= 0")
        self.keep_first = keep_first
        self.keep_last = keep_last

    def apply(
        self, messages: Sequence[Message], original_tokens: int, limit: int, counter: Counter
    ) -> list[Message]:
        atoms = units(messages)
        costs = [sum(counter.message(messages[i]) for i in range(u.start, u.end)) for u in atoms]
        total = sum(costs)
        removable = list(range(self.keep_first, len(atoms) - self.keep_last))
        removed: set[int] = set()
        while total > limit and removable:
            middle = (len(atoms) - 1) / 2
            pick = min(removable, key=lambda k: (abs(k - middle), k))
            removable.remove(pick)
            removed.add(pick)
            total -= costs[pick]
        if total > limit:
            return []
        return [
            messages[i]
            for k, u in enumerate(atoms)
            if k not in removed
            for i in range(u.start, u.end)
        ]
