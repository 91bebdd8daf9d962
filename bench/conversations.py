"""Synthetic agent conversations of a given size: user turns, tool calls and tool results."""

from __future__ import annotations

import random
from typing import Any

from strategies.tokens import Counter, count_prompt

WORDS = [
    "context",
    "window",
    "token",
    "budget",
    "proxy",
    "request",
    "summary",
    "checkpoint",
    "stream",
    "relay",
    "model",
    "tool",
    "call",
    "result",
    "file",
    "path",
    "function",
    "error",
    "retry",
    "cache",
    "prefix",
    "history",
    "turn",
    "message",
    "system",
    "user",
]


def agent_conversation(tokens: int, counter: Counter, seed: int = 7) -> list[dict[str, Any]]:
    """Grow an agent conversation until it holds about ``tokens`` tokens."""
    rng = random.Random(seed)
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 10}]
    total = count_prompt(counter, msgs)
    turn = 0
    while total < tokens:
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
        turn_msgs: list[dict[str, Any]] = [{"role": "user", "content": f"Task {turn}: {text}"}]
        for k in range(rng.randint(0, 3)):
            call_id = f"call_{turn}_{k}"
            args = f'{{"path": "src/module_{rng.randint(0, 40)}.py"}}'
            turn_msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": args},
                        }
                    ],
                }
            )
            result = " ".join(rng.choice(WORDS) for _ in range(rng.randint(50, 600)))
            turn_msgs.append({"role": "tool", "tool_call_id": call_id, "content": result})
        turn_msgs.append(
            {
                "role": "assistant",
                "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 150))),
            }
        )
        msgs += turn_msgs
        total += sum(counter.message(m) for m in turn_msgs)
        turn += 1
    msgs.append({"role": "user", "content": "Now finish the task."})
    return msgs
