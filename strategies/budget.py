"""How many tokens a request's messages may use.

``budget = window - reply reserve - tool definitions - safety margin``. The reply reserve is the
request's own ``max_completion_tokens`` / ``max_tokens`` when it sets one, else a default capped
by the model's output limit and by a quarter of the window (so small local models keep room for
their prompt).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PER_MESSAGE_BOUND = 4
PER_TOOL_CALL_BOUND = 12


@dataclass(frozen=True, slots=True)
class Budget:
    window: int
    reserve: int
    tools: int
    margin: int

    @property
    def messages(self) -> int:
        return self.window - self.reserve - self.tools - self.margin

    def explain(self) -> str:
        return (
            f"window {self.window} - reply reserve {self.reserve} - tool definitions "
            f"{self.tools} - safety margin {self.margin} = {self.messages} tokens for messages"
        )


CHAT_OUTPUT_KEYS = ("max_completion_tokens", "max_tokens")


def requested_output(
    payload: Mapping[str, Any], keys: tuple[str, ...] = CHAT_OUTPUT_KEYS
) -> int | None:
    """The request's own reply limit: the first of ``keys`` set to a positive integer."""
    for key in keys:
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def reply_reserve(asked: int | None, default: int, max_output: int | None, window: int) -> int:
    if asked is not None:
        return asked
    cap = min(default, window // 4)
    return min(cap, max_output) if max_output else cap


def byte_bound(
    body_len: int,
    messages: list[dict[str, Any]],
    tokens_per_byte: float,
    worst_image: int,
    priming: int,
) -> int:
    """An upper bound on the messages' tokens that needs no tokenizer.

    Every BPE token spans at least one byte and JSON text is never shorter than the UTF-8 text it
    encodes, so the body's length bounds the text; images, per-message and per-call overheads are
    added on top, all scaled by the counter's worst tokens per byte, plus 3 a message for the
    template markers an estimating counter adds. The result is >= the exact count.
    ``messages`` must have passed validation (dicts; content parts are dicts).
    """
    overhead = 0
    images = 0
    for message in messages:
        overhead += PER_MESSAGE_BOUND
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            overhead += PER_TOOL_CALL_BOUND * len(calls)
        content = message.get("content")
        if isinstance(content, list):
            images += sum(
                1 for p in content if isinstance(p, dict) and p.get("type") == "image_url"
            )
    scaled = math.ceil((body_len + overhead) * tokens_per_byte)
    return scaled + 3 * len(messages) + worst_image * images + priming
