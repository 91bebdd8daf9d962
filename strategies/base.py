"""The one Protocol every eviction strategy implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from strategies.messages import Message
from strategies.tokens import Counter


class Strategy(Protocol):
    """Makes one block's messages fit ``limit`` tokens.

    A strategy is built once per policy, from its options. One that needs the request's context
    also defines ``bind(*, query: str, budget: int)``, returning a copy for that request: the
    user's current message (``relevance_drop``) or the messages' budget (``truncate_oldest``'s
    cache grid). ``apply`` is called only when the block does not fit. It returns the messages
    to keep (an empty list drops the block) whose count must be at most ``limit``, or raises a
    ContextError. It must not mutate its input; messages it keeps unchanged are returned as the
    same objects.
    """

    name: str
    label: str

    def apply(
        self, messages: Sequence[Message], original_tokens: int, limit: int, counter: Counter
    ) -> list[Message]: ...
