"""Putting a fitted conversation back together.

Kept messages return in conversation order (blocks are allocated in tier order, but a proxy
must keep the chat's sequence); formatted blocks merge into the system message; and a safety
net drops any tool-call unit a rule split across blocks, so no call leaves without its results
nor a result without its call.
"""

from __future__ import annotations

from collections.abc import Sequence

from strategies.formatter import facts_of, inject_into_system
from strategies.messages import (
    LEADING_ROLES,
    RESULT_ROLES,
    Message,
    result_role,
    role,
    tool_call_ids,
)
from strategies.rules import Assignment


def reassemble(
    messages: Sequence[Message], assignments: Sequence[Assignment], outputs: Sequence[list[Message]]
) -> list[Message]:
    """Kept messages back in conversation order; formatted blocks merged into the system message.

    A strategy may return new messages (a summary): they take the place of the first message of
    the block they replace.
    """
    placed: list[tuple[int, int, Message]] = []
    facts: list[str] = []
    for a, out in zip(assignments, outputs, strict=True):
        if a.rule.inject_into_system:
            facts += facts_of(out)
            continue
        originals = {id(messages[i]): i for i in a.indices}
        anchor = a.indices[0] if a.indices else len(messages)
        for k, m in enumerate(out):
            placed.append((originals.get(id(m), anchor), k, m))
    placed.sort(key=lambda t: (t[0], t[1]))
    kept = [m for _, _, m in placed]
    kind = next((a.rule.inject_into_system for a in assignments if a.rule.inject_into_system), None)
    if facts and kind:
        if kept and role(kept[0]) in LEADING_ROLES:
            kept[0] = inject_into_system(kept[0], facts, kind)
        else:
            kept.insert(0, inject_into_system({"role": "system", "content": ""}, facts, kind))
    return drop_broken_pairs(kept)


def drop_broken_pairs(messages: list[Message]) -> list[Message]:
    """Safety net for rules that split a tool loop across blocks: an assistant ``tool_calls``
    (or ``function_call``) message missing any result goes with its remaining results, and
    results whose call is gone go too. Removing only ever lowers the count, so the budget still
    holds."""
    out: list[Message] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if role(m) in RESULT_ROLES:
            i += 1
            continue  # a result not directly after its call
        answers = result_role(m)
        if answers is None:
            out.append(m)
            i += 1
            continue
        j = i + 1
        while j < len(messages) and role(messages[j]) == answers:
            j += 1
        if answers == "function":
            complete = j > i + 1
        else:
            answered = {messages[k].get("tool_call_id") for k in range(i + 1, j)}
            complete = set(tool_call_ids(m)) <= answered
        if complete:
            out.extend(messages[i:j])
        i = j
    return out
