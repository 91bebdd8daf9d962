"""The demo's clients, one per wire format, each through its real SDK, and the line each prints
per turn (``report``, from the proxy's headers).

converse_chat        a growing chat conversation with a system prompt
converse_responses   a Codex-style stateless loop: ``store: false``, reasoning items with
                     encrypted content, a function tool and its outputs
converse_anthropic   a Claude-Code-style loop: system and tools with ``cache_control``,
                     thinking with signatures, tool_use and tool_result
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Called after each request: the demo waits there for the proxy's background work (a summary
# being prepared), as a user's pause between turns would, so that every run prints the same.
Settle = Callable[[], None]


def _nothing() -> None:
    return None


MODEL = "demo-model"
FILLER = (
    "Tell me more about context windows, token budgets and how a proxy keeps a long "
    "conversation inside them without losing the system prompt. "
)


CLAUDE = "claude-demo"
TOOL = {"name": "read", "description": "Read a file"}
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def converse_responses(
    proxy_url: str, received: list[dict[str, Any]], turns: int, settle: Settle = _nothing
) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{proxy_url}/v1", api_key="demo", max_retries=0)
    items: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        items.append({"role": "user", "content": f"Turn {turn}. {FILLER}"})
        for _ in range(2):  # the call, then the answer after its output
            sent = len(items)
            request: dict[str, Any] = {
                "model": MODEL,
                "input": items,
                "instructions": "You are a coding agent. Never forget this line.",
                "tools": [{"type": "function", **TOOL, "parameters": SCHEMA}],
                "store": False,
                "include": ["reasoning.encrypted_content"],
                "max_output_tokens": 128,
            }
            raw = client.responses.with_raw_response.create(**request)
            response = raw.parse()
            items += [o.model_dump(exclude_none=True) for o in response.output]
            calls = [o for o in response.output if o.type == "function_call"]
            for call in calls:
                output = f"Contents of the file: {FILLER}"
                items.append(
                    {"type": "function_call_output", "call_id": call.call_id, "output": output}
                )
            report(turn, sent, len(received[-1]["input"]), raw.headers)
            settle()
            if not calls:
                break
    print("\nsent: items the client sent; fwd: items the upstream received.")


def converse_anthropic(
    proxy_url: str, received: list[dict[str, Any]], turns: int, settle: Settle = _nothing
) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=proxy_url, api_key="demo", max_retries=0)
    cache = {"type": "ephemeral"}
    system = [
        {
            "type": "text",
            "text": "You are a coding agent. Never forget this line.",
            "cache_control": cache,
        }
    ]
    tools = [{**TOOL, "input_schema": SCHEMA, "cache_control": cache}]
    messages: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        messages.append(
            {"role": "user", "content": [{"type": "text", "text": f"Turn {turn}. {FILLER}"}]}
        )
        for _ in range(2):
            sent = len(messages)
            request: dict[str, Any] = {
                "model": CLAUDE,
                "max_tokens": 128,
                "system": system,
                "tools": tools,
                "messages": messages,
                "thinking": {"type": "enabled", "budget_tokens": 64},
            }
            raw = client.messages.with_raw_response.create(**request)
            message = raw.parse()
            messages.append(
                {
                    "role": "assistant",
                    "content": [b.model_dump(exclude_none=True) for b in message.content],
                }
            )
            uses = [b for b in message.content if b.type == "tool_use"]
            if uses:
                results = [
                    {"type": "tool_result", "tool_use_id": u.id, "content": FILLER} for u in uses
                ]
                messages.append({"role": "user", "content": results})
            report(turn, sent, len(received[-1]["messages"]), raw.headers)
            settle()
            if not uses:
                break
    print("\nsent: messages the client sent; fwd: messages the upstream received.")
    print(
        "budget: in the proxy's own count. Claude is only estimated (cl100k x 1.2); once the\n"
        "upstream's usage has calibrated the estimate, a budget above the window means the\n"
        "estimate runs high: the window is the same, measured in the proxy's larger units."
    )


def report(turn: int, sent: int, forwarded: int, h: Any) -> None:
    """One turn's line, from the proxy's x-contextwarden-* headers."""
    # A request that fits by the byte bound is not tokenized: its count is an upper bound.
    bound = "≤" if h["x-contextwarden-count"] == "bound" else ""
    before, after = h["x-contextwarden-tokens-before"], h["x-contextwarden-tokens-after"]
    tokens = f"{bound}{before}->{bound}{after}"
    checkpoint = h.get("x-contextwarden-checkpoint")
    print(
        f"{turn:>4} {sent:>5} {forwarded:>4} {tokens:>13} "
        f"{h['x-contextwarden-budget']:>6}  {h['x-contextwarden-actions']}"
        + (f" (checkpoint {checkpoint})" if checkpoint else "")
    )


def converse_chat(
    proxy_url: str, received: list[dict[str, Any]], turns: int, settle: Settle = _nothing
) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{proxy_url}/v1", api_key="demo", max_retries=0)
    messages: list[Any] = [
        {"role": "system", "content": "You are a concise assistant. Never forget this line."}
    ]
    for turn in range(1, turns + 1):
        messages.append({"role": "user", "content": f"Turn {turn}. {FILLER * 2}"})
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=messages,
            max_tokens=128,
        )
        answer = raw.parse().choices[0].message.content or ""
        report(turn, len(messages), len(received[-1]["messages"]), raw.headers)
        settle()
        messages.append({"role": "assistant", "content": answer})
    print("\nsent: messages the client sent; fwd: messages the upstream received;")
    print("≤: an upper bound from the body's size (a request that clearly fits is not counted).")
