"""Agent-sized requests: the added latency the red-team harness measured (a mean of 6.5k tokens
against a small window), in all three formats, beside the pass-through floor.

One tool loop grows from about 5k to 10k o200k tokens, a request per step, against an 8k window:
the first half fits, the second is trimmed (replayed, mostly, as sticky cuts go). The same steps
are written as chat completions, Responses items and Messages blocks, so the three formats carry
the same conversation. Each pass starts a new conversation (its task differs), so the proxy's
memory of the last one does not help the next.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from bench.families import TOOLS, _words
from proxy.windows.tokenizers import text_tokens
from strategies.tokens import ChatCounter, count_prompt

MODEL = "bench-agent"
WINDOW = 8192
START, END = 5000, 10000
Messages = list[dict[str, Any]]


def steps(seed: int) -> list[Messages]:
    """The chat messages of each request of one pass, from about START to END tokens."""
    rng = random.Random(seed)
    counter = ChatCounter(text_tokens("o200k_base"))
    msgs: Messages = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": f"Task {seed}: {_words(rng, 80, 'database')}"},
    ]
    out: list[Messages] = []
    step = 0
    while True:
        tokens = count_prompt(counter, msgs)
        if tokens > END:
            return out
        if tokens >= START:
            out.append(list(msgs))
        calls = [
            {
                "id": f"call_{seed}_{step}_{k}",
                "type": "function",
                "function": {
                    "name": rng.choice(TOOLS),
                    "arguments": f'{{"path": "src/mod{step}_{k}.py"}}',
                },
            }
            for k in range(rng.choice((1, 1, 1, 2)))
        ]
        msgs.append({"role": "assistant", "content": _words(rng, 20) or None, "tool_calls": calls})
        for call in calls:
            result = _words(rng, rng.randint(40, 200), "database")
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        step += 1


def chat_body(msgs: Messages) -> bytes:
    return orjson.dumps({"model": MODEL, "messages": msgs, "max_tokens": 256})


def responses_body(msgs: Messages) -> bytes:
    items: list[dict[str, Any]] = []
    for m in msgs[1:]:
        if m["role"] == "user":
            items.append({"role": "user", "content": m["content"]})
        elif m["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
        else:
            if m.get("content"):
                text = {"type": "output_text", "text": m["content"]}
                items.append({"type": "message", "role": "assistant", "content": [text]})
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": fn["name"],
                        "arguments": fn["arguments"],
                    }
                )
    payload = {
        "model": MODEL,
        "instructions": msgs[0]["content"],
        "input": items,
        "max_output_tokens": 256,
    }
    return orjson.dumps(payload)


def messages_body(msgs: Messages) -> bytes:
    out: list[dict[str, Any]] = []
    for m in msgs[1:]:
        if m["role"] == "user":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        else:
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": fn["name"],
                        "input": orjson.loads(fn["arguments"]),
                    }
                )
            out.append({"role": "assistant", "content": blocks})
    payload = {"model": MODEL, "max_tokens": 256, "system": msgs[0]["content"], "messages": out}
    return orjson.dumps(payload)


FORMATS = (
    ("chat", "/v1/chat/completions", chat_body),
    ("responses", "/v1/responses", responses_body),
    ("anthropic", "/v1/messages", messages_body),
)


def passes(n: int) -> list[list[Messages]]:
    """``n`` conversations, each a list of requests (the seeds make each one new)."""
    return [steps(1000 + k) for k in range(n)]
