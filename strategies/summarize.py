"""``summarize``: replace a block by a summary written by a :class:`Summarizer`.

contexty's SummarizeStrategy: the summarizer gets the block's messages and the limit; if its
summary still does not fit, the block is dropped. The summarizer is injected: the proxy gives it
an LLM, tests give it a double.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from strategies.messages import Message
from strategies.tokens import Counter


class Summarizer(Protocol):
    def summarize(self, messages: Sequence[Message], limit: int) -> Message:
        """One message standing for ``messages``, ideally within ``limit`` tokens."""
        ...


class Summarize:
    name = "summarize"
    label = "summarized"

    def __init__(self, summarizer: Summarizer) -> None:
        self.summarizer = summarizer

    def apply(
        self, messages: Sequence[Message], original_tokens: int, limit: int, counter: Counter
    ) -> list[Message]:
        summary = self.summarizer.summarize(messages, limit)
        if counter.message(summary) > limit:
            return []
        return [summary]
