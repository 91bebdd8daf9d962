"""``light_trim``: shorten oversized text in older messages (agentcore's LightTrim).

Messages older than the last ``keep_recent`` keep their first ``preserve_head`` and last
``preserve_tail`` characters of any text over ``text_threshold`` characters, with a marker saying
how many were cut in between. A tool output that is an error (strategies/error_output.py) is
never trimmed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strategies.error_output import is_error_result
from strategies.messages import Message, attached
from strategies.tokens import Counter


@dataclass(frozen=True, slots=True, kw_only=True)
class LightTrim:
    keep_recent: int = 4
    text_threshold: int = 4000
    preserve_head: int = 1200
    preserve_tail: int = 800

    name = "light_trim"

    def __post_init__(self) -> None:
        if min(self.keep_recent, self.preserve_head, self.preserve_tail) < 0:
            raise ValueError("keep_recent, preserve_head and preserve_tail must be >= 0")
        if self.text_threshold <= 0:
            raise ValueError("text_threshold must be > 0")

    def apply(self, messages: Sequence[Message], counter: Counter) -> list[Message]:
        stop = max(0, len(messages) - self.keep_recent)
        # An attached message (a client's mid-conversation instruction) goes whole or not at
        # all: strategies/attached.py. An error output is never trimmed.
        return [
            self._trim_message(m) if i < stop and not attached(m) and not is_error_result(m) else m
            for i, m in enumerate(messages)
        ]

    def trim_text(self, text: str) -> str:
        if len(text) <= self.text_threshold:
            return text
        cut = len(text) - self.preserve_head - self.preserve_tail
        head, tail = text[: self.preserve_head], text[len(text) - self.preserve_tail :]
        return f"{head}\n[{cut} characters trimmed]\n{tail}"

    def _trim_message(self, message: Message) -> Message:
        content = message.get("content")
        if isinstance(content, str):
            trimmed = self.trim_text(content)
            return message if trimmed is content else {**message, "content": trimmed}
        if isinstance(content, list):
            parts = [self._trim_part(p) for p in content]
            if any(a is not b for a, b in zip(parts, content, strict=True)):
                return {**message, "content": parts}
        return message

    def _trim_part(self, part: Any) -> Any:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            trimmed = self.trim_text(part["text"])
            return part if trimmed is part["text"] else {**part, "text": trimmed}
        return part
