"""Tool-call repair (the coding-agent Manager's ReconcileToolCalls, for OpenAI's format).

Interrupted agent clients send histories providers reject: a tool result after a user message
instead of right after its call, a call whose result never came, a result for no call. Repair
moves each late result next to its call, answers a missing one with a clear "cancelled" stand-in,
and drops orphan results. The legacy format alike: a ``function_call`` with no ``function``
message right after it gets a stand-in, and a ``function`` message after no call is dropped.
Messages it does not move or add are returned as the same objects.
"""

from __future__ import annotations

from collections.abc import Sequence

from strategies.messages import Message, function_call, role, tool_call_ids

CANCELLED = "operation cancelled - tool call was interrupted before it could complete"


def repair_tool_calls(messages: Sequence[Message]) -> tuple[list[Message], bool]:
    """The repaired conversation and whether anything changed."""
    results: dict[str, Message] = {}
    called: set[str] = set()
    for m in messages:
        called.update(tool_call_ids(m))
        call_id = m.get("tool_call_id")
        if role(m) == "tool" and isinstance(call_id, str) and call_id in called:
            results.setdefault(call_id, m)
    out: list[Message] = []
    for i, m in enumerate(messages):
        if role(m) == "tool":
            continue  # every result is placed right after its call below
        if role(m) == "function" and not (out and function_call(out[-1]) is not None):
            continue  # an orphan function result
        out.append(m)
        for call_id in tool_call_ids(m):
            result = results.pop(call_id, None)
            out.append(result or {"role": "tool", "tool_call_id": call_id, "content": CANCELLED})
        call = function_call(m)
        following = messages[i + 1] if i + 1 < len(messages) else None
        if call is not None and (following is None or role(following) != "function"):
            name = call.get("name") if isinstance(call.get("name"), str) else ""
            out.append({"role": "function", "name": name, "content": CANCELLED})
    changed = len(out) != len(messages) or any(
        a is not b for a, b in zip(out, messages, strict=True)
    )
    return out, changed
