"""Test counters: token counts the tests can predict, standing in for a model's tokenizer.

The engine takes any ``Counter`` (strategies/tokens.py); these two are the reference
libraries' test counters, kept here because only the tests count this way.
"""

from __future__ import annotations

import math

import orjson

from strategies.messages import Message


class FixedCounter:
    """Charges a fixed number of tokens per message (the reference libraries' test counter)."""

    def __init__(self, per_message: int, priming: int = 0) -> None:
        self._per_message = per_message
        self.priming = priming

    def message(self, message: Message) -> int:
        return self._per_message

    def tools(self, tools: object, functions: object) -> int:
        return 0


class CharCounter:
    """contexty's CharFallbackCounter, per message: ``ceil(chars / chars_per_token)``.

    Non-text parts count ``tokens_per_non_text_part`` tokens; tool calls count their name and
    arguments plus 20 tokens each.
    """

    def __init__(self, chars_per_token: float = 4.0, tokens_per_non_text_part: int = 85) -> None:
        if not chars_per_token > 0 or tokens_per_non_text_part < 0:
            raise ValueError("chars_per_token must be > 0 and tokens_per_non_text_part >= 0")
        self._cpt = chars_per_token
        self._non_text = tokens_per_non_text_part
        self.priming = 0

    def message(self, message: Message) -> int:
        chars = len(message["name"]) if isinstance(message.get("name"), str) else 0
        extra = 0
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    chars += len(part["text"])
                else:
                    extra += self._non_text
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            chars += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
            extra += 20
        return math.ceil(chars / self._cpt) + extra

    def tools(self, tools: object, functions: object) -> int:
        if not tools and not functions:
            return 0
        return math.ceil(len(orjson.dumps([tools, functions])) / self._cpt)
