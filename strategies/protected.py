"""What every plan keeps byte for byte: the leading instructions, the task and the newest step.

    protected(messages, rules, atomic, continuing) -> Protected

- **The leading instructions**: the system/developer messages that open the conversation and
  that the policy keeps whole (a rule with the ``strict`` strategy takes them). A policy that
  makes them documents (``relevance_drop`` on ``position: leading``) or injects facts into the
  system prompt has chosen otherwise, and those are not protected.
- **The task**: the user message that opened the current turn (a running task's statement:
  the newest user message that does not only continue its tool loop).
- **The newest step**: the last assistant message after the task, with its calls, their
  outputs and whatever follows them; or, when the task has no answer yet, nothing more.

The engine keeps these (``strategies/engine.py`` holds the newest step and the task as a strict
block), and the proxy checks every plan against them before it is written (its
post-condition). Pure: indices into the messages, no copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strategies.messages import Message, leading_count, role
from strategies.rules import Position, Rule, current_turn_start, running_task


@dataclass(frozen=True, slots=True, kw_only=True)
class Protected:
    """Indices of the protected messages of one conversation."""

    leading: tuple[int, ...]  # the leading instructions the policy keeps strict
    task: int  # the task message; -1 when the conversation has no user message after its lead
    newest: int  # where the newest step starts: it runs to the end (== len when none)
    size: int  # len(messages)

    @property
    def step(self) -> range:
        return range(self.newest, self.size)

    def indices(self) -> list[int]:
        """Every protected index, in conversation order."""
        task = [self.task] if 0 <= self.task < self.newest else []
        return [*self.leading, *task, *self.step]


def protected(
    messages: Sequence[Message],
    rules: Sequence[Rule],
    atomic: bool = False,
    continuing: frozenset[int] = frozenset(),
) -> Protected:
    lead = leading_count(messages)
    if atomic:
        task, newest = running_task(messages, lead, continuing)
    else:
        task = current_turn_start(messages, lead)
        newest = next(
            (i for i in range(len(messages) - 1, task, -1) if role(messages[i]) == "assistant"),
            task,
        )
    if not (lead <= task < len(messages)) or role(messages[task]) != "user":
        task = -1  # no user message after the lead: the newest step is all there is
    if task >= 0 and newest == task:
        newest = task + 1  # the task alone: a new turn, no step yet
    return Protected(
        leading=strict_leading(messages, lead, rules), task=task, newest=newest, size=len(messages)
    )


def strict_leading(
    messages: Sequence[Message], lead: int, rules: Sequence[Rule]
) -> tuple[int, ...]:
    """The leading messages whose rule (the first that takes them) keeps them whole."""
    if any(r.inject_into_system for r in rules):
        return ()  # the system prompt is rewritten by design: facts are merged into it
    out = []
    for i in range(lead):
        where: Position = "first" if i == 0 else "leading"
        from_end = len(messages) - i
        rule = next((r for r in rules if r.match.accepts(messages[i], where, from_end)), None)
        if rule is not None and rule.strategy == "strict":
            out.append(i)
    return tuple(out)
