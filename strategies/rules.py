"""From one request's messages to blocks, by policy rules.

A rule matches messages by role, ``name``, position (the leading system/developer run, the current
turn, the rest) or the last N messages, and a content regex, and says which block they go to: its
tier, strategy and options, token cap and formatter. Matching is done per *unit* (an assistant
``tool_calls`` message with its results is matched by the assistant message and placed whole),
first rule wins, and whatever no rule takes goes to the policy's history block.

And back: after allocation, kept messages return in conversation order (blocks are allocated in
tier order, but a proxy must keep the chat's sequence); formatted blocks merge into the system
message; and a safety net drops any tool-call unit a rule split across blocks, so no call leaves
without its results nor a result without its call (``reassemble``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from strategies.blocks import BlockReport
from strategies.client_summaries import is_client_summary
from strategies.formatter import FormatterName, facts_of, inject_into_system
from strategies.messages import (
    ANSWERING,
    LEADING_ROLES,
    Message,
    Unit,
    leading_count,
    result_role,
    role,
    tool_call_ids,
    units,
)
from strategies.messages import iter_text as _texts
from strategies.tokens import Counter

Position = Literal["any", "first", "leading", "current", "steps", "history"]
TIERS = {"system": 0, "core": 1, "rag": 2, "history": 3, "scratchpad": 4}


@dataclass(frozen=True, slots=True, kw_only=True)
class Match:
    roles: tuple[str, ...] = ()
    name: str | None = None
    position: Position = "any"
    last: int = 0
    content_regex: str | None = None

    def accepts(self, message: Message, where: Position, from_end: int) -> bool:
        if self.roles and role(message) not in self.roles:
            return False
        if self.name is not None and message.get("name") != self.name:
            return False
        # "first" is the first leading message; a rule for "leading" takes it too.
        leading = self.position == "leading" and where == "first"
        if self.position != "any" and self.position != where and not leading:
            return False
        if self.last and from_end > self.last:
            return False
        if self.content_regex is not None:
            pattern = re.compile(self.content_regex)
            return any(pattern.search(t) for t in _texts(message))
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    id: str
    match: Match
    tier: int
    strategy: str = "strict"
    options: Mapping[str, Any] = field(default_factory=dict)
    max_tokens: int = 0
    inject_into_system: FormatterName | None = None


# The system prompt is the first system/developer message: kept whole or the request refused.
SYSTEM_RULE = Rule(
    id="system", match=Match(position="first"), tier=TIERS["system"], strategy="strict"
)
# Further leading system/developer messages are the application's too (a safety policy, a
# persona, Codex's developer prompt): strict by default, never dropped silently.
LEADING_RULE = Rule(
    id="leading", match=Match(position="leading"), tier=TIERS["system"], strategy="strict"
)
# A RAG app that puts retrieved documents there chooses this in a policy (the example config's
# ``rag`` policy): evicted whole, the least relevant to the user's current message first.
DOCUMENTS_RULE = Rule(
    id="documents", match=Match(position="leading"), tier=TIERS["rag"], strategy="relevance_drop"
)
CURRENT_RULE = Rule(
    id="current",
    match=Match(position="current"),
    tier=TIERS["core"],
    strategy="truncate_oldest",
    options={"unit": "message", "protect_roles": ["user"]},
)
DEFAULT_RULES: tuple[Rule, ...] = (SYSTEM_RULE, LEADING_RULE, CURRENT_RULE)


@dataclass(slots=True)
class Assignment:
    """Which rule took which message indices (in conversation order)."""

    rule: Rule
    indices: list[int] = field(default_factory=list)


# Pinned messages: kept verbatim, never dropped, trimmed or summarized (a strict block).
PINNED_RULE = Rule(id="pinned", match=Match(), tier=TIERS["core"], strategy="strict")
# The newest step (and a chat turn's task): what every plan keeps (strategies/protected.py).
NEWEST_RULE = Rule(id="newest", match=Match(), tier=TIERS["core"], strategy="strict")


@dataclass(frozen=True, slots=True)
class Running:
    """Whether the current turn is a running task kept by its statement and newest step
    (``atomic``: see :func:`running_task`), and which of its user messages only continue its
    loop (ids)."""

    atomic: bool = False
    continuing: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Held:
    """What an allocation holds as strict blocks before any rule takes a message: the units
    holding a ``pinned`` message (ids), then those holding a ``protected`` one (indices: the
    newest step, strategies/protected.py)."""

    pinned: frozenset[int] = frozenset()
    protected: frozenset[int] = frozenset()


NOT_RUNNING = Running()
NOTHING_HELD = Held()


def assign(
    messages: Sequence[Message],
    rules: Sequence[Rule],
    history: Rule,
    held: Held = NOTHING_HELD,
    running: Running = NOT_RUNNING,
) -> list[Assignment]:
    """One assignment per rule (in rule order) plus the history rule last; with ``held``
    pinned messages, a first assignment takes every unit holding one, and with ``held``
    protected indices one more takes theirs.

    ``running.atomic``: the current turn is a running task (see :func:`running_task`); its
    completed steps stand at position ``steps``, its task message and newest step at
    ``current``; ``running.continuing`` names the user messages that continue its loop."""
    pinned, protected = held.pinned, held.protected
    lead = leading_count(messages)
    current, newest = (
        running_task(messages, lead, running.continuing)
        if running.atomic
        else (current_turn_start(messages, lead),) * 2
    )
    out = [Assignment(r) for r in (*rules, history)]
    pins, kept = Assignment(PINNED_RULE), Assignment(NEWEST_RULE)
    for unit in units(messages):
        if pinned and any(id(messages[i]) in pinned for i in range(unit.start, unit.end)):
            pins.indices.extend(range(unit.start, unit.end))
            continue
        if protected and any(i in protected for i in range(unit.start, unit.end)):
            kept.indices.extend(range(unit.start, unit.end))
            continue
        where = _position(unit, lead, current, newest)
        from_end = len(messages) - unit.start
        target = next(
            (a for a in out[:-1] if a.rule.match.accepts(messages[unit.start], where, from_end)),
            out[-1],
        )
        target.indices.extend(range(unit.start, unit.end))
    first = [a for a in (pins, kept) if a.indices]
    return [*first, *out] if first else out


def pinned_ids(messages: Sequence[Message], pins: Sequence[Match]) -> frozenset[int]:
    """Ids of the messages in units whose first message a pin matches (positions as rules
    see them)."""
    if not pins:
        return frozenset()
    lead = leading_count(messages)
    current = current_turn_start(messages, lead)
    out: set[int] = set()
    for unit in units(messages):
        where = _position(unit, lead, current, current)
        from_end = len(messages) - unit.start
        if any(p.accepts(messages[unit.start], where, from_end) for p in pins):
            out.update(id(messages[i]) for i in range(unit.start, unit.end))
    return frozenset(out)


def _position(unit: Unit, lead: int, current: int, newest: int) -> Position:
    if unit.start < lead:
        return "first" if unit.start == 0 else "leading"
    if current < unit.start < newest:
        return "steps"
    if unit.start >= current:
        return "current"
    return "history"


def current_turn_start(messages: Sequence[Message], lead: int) -> int:
    """Index where the current turn starts: the last user message, else the last unit."""
    for i in range(len(messages) - 1, lead - 1, -1):
        if messages[i].get("role") == "user":
            return i
    tail = units(messages, lead)
    return tail[-1].start if tail else len(messages)


def running_task(
    messages: Sequence[Message], lead: int, continuing: frozenset[int] = frozenset()
) -> tuple[int, int]:
    """(task, newest step) of a running agent task: the index of the user message that states
    the task and of the newest step (the last assistant message, with its calls and their
    results after it). A user message in ``continuing`` (ids) is part of the loop, not a new
    task: Claude Code adds reminders to the message that carries its tool results, which the
    Messages view shows as a user message of its own. An agent's summary of its own history
    (strategies/client_summaries.py) is not the task either, unless no other user message is
    left. The steps between the task and the
    newest step are completed: their results may be cleared and whole steps dropped, oldest
    first; the task and the newest step stay as they came."""
    task = summary = -1
    for i in range(len(messages) - 1, lead - 1, -1):
        if messages[i].get("role") != "user" or id(messages[i]) in continuing:
            continue
        if not is_client_summary(messages[i]):
            task = i
            break
        summary = max(summary, i)
    if task < 0:
        task = summary  # no user message of its own is left: the summary carries the task
    if task < 0:
        start = current_turn_start(messages, lead)
        return start, start
    newest = next(
        (i for i in range(len(messages) - 1, task, -1) if messages[i].get("role") == "assistant"),
        task,
    )
    return task, newest


def breakdown(
    messages: Sequence[Message], counter: Counter, rules: Sequence[Rule], history: Rule
) -> list[BlockReport]:
    """How a conversation splits into a policy's blocks, with counts (nothing evicted)."""
    out: list[BlockReport] = []
    for a in assign(messages, rules, history):
        if a.indices:
            tokens = sum(counter.message(messages[i]) for i in a.indices)
            out.append(
                BlockReport(
                    id=a.rule.id,
                    tier=a.rule.tier,
                    strategy=a.rule.strategy,
                    tokens_before=tokens,
                    tokens_after=tokens,
                )
            )
    out.sort(key=lambda b: b.tier)
    return out


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


def pairs_whole(messages: Sequence[Message]) -> bool:
    """No call without every one of its results, no result without its call: what
    ``drop_broken_pairs`` would leave as it is. One pass, nothing built for a message that makes
    no call (the post-condition asks it of every plan that changed a conversation)."""
    answers: object = None  # the role of the results the run being read takes
    waiting: set[object] = set()  # the calls still without their result
    for m in messages:
        role_ = m.get("role")
        if role_ == "tool" or role_ == "function":
            if role_ != answers:
                return False  # a result not directly after its call
            waiting.discard(m.get("tool_call_id") if role_ == "tool" else None)
            continue
        if waiting:
            return False  # a call whose results stopped before all had come
        answers = None
        if role_ != "assistant":
            continue
        calls = m.get("tool_calls")
        if isinstance(calls, list) and any(isinstance(c, dict) for c in calls):
            answers = "tool"
            waiting = {str(c.get("id")) for c in calls if isinstance(c, dict)}
        elif isinstance(m.get("function_call"), dict):
            answers, waiting = "function", {None}
    return not waiting


def drop_broken_pairs(messages: list[Message]) -> list[Message]:
    """Safety net for rules that split a tool loop across blocks: an assistant ``tool_calls``
    (or ``function_call``) message missing any result goes with its remaining results, and
    results whose call is gone go too. Removing only ever lowers the count, so the budget still
    holds."""
    out: list[Message] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.get("role") in ANSWERING:
            i += 1
            continue  # a result not directly after its call
        answers = result_role(m)
        if answers is None:
            out.append(m)
            i += 1
            continue
        j = i + 1
        while j < len(messages) and messages[j].get("role") == answers:
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
