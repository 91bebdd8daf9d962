"""Deciding what to forward: the original bytes when they fit, a trimmed body when not."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.errors import ContextTooLarge
from proxy.models import ModelSpec
from proxy.overflow import Overflow
from strategies.budget import Budget, byte_bound, reply_reserve
from strategies.engine import Fit, fit
from strategies.errors import DoesNotFit


@dataclass(slots=True)
class Plan:
    """A body to send and what the headers say about it."""

    body: bytes
    budget: Budget | None
    tokens_before: int | None = None
    tokens_after: int | None = None
    actions: list[str] = field(default_factory=list)
    counted: str = "exact"
    fit: Fit | None = None


async def first_plan(
    body: bytes,
    payload: dict[str, Any],
    spec: ModelSpec,
    window: int | None,
    default_reserve: int,
    margin: int,
    exact: bool = False,
) -> Plan:
    """Plan the first attempt; raises ContextTooLarge when nothing can make it fit.

    ``exact`` skips the byte-bound fast path (the preview always counts)."""
    if window is None:
        return Plan(body, None, actions=["unknown-window"], counted="none")
    pricing = spec.pricing
    counter = pricing.counter
    reserve = reply_reserve(payload, default_reserve, spec.max_output, window)
    budget = Budget(
        window, reserve, counter.tools(payload.get("tools"), payload.get("functions")), margin
    )
    if budget.messages <= 0:
        raise ContextTooLarge(
            f"no room is left for the messages: {budget.explain()}", param="messages"
        )
    messages = payload["messages"]
    bound = byte_bound(
        len(body), messages, pricing.tokens_per_byte, pricing.worst_image, counter.priming
    )
    if bound <= budget.messages and not spec.policy.repair_tool_calls and not exact:
        return Plan(body, budget, bound, bound, counted="bound")
    return await fitted_plan(body, payload, spec, budget)


async def fitted_plan(
    body: bytes, payload: dict[str, Any], spec: ModelSpec, budget: Budget
) -> Plan:
    """Count and, if needed, trim; in a worker thread, since tokenizing a long conversation is
    CPU work that would stall every other request on the event loop (tiktoken drops the GIL)."""
    counted = "exact" if spec.pricing.exact else "estimate"
    try:
        result = await asyncio.to_thread(
            fit, payload["messages"], budget.messages, spec.pricing.counter, spec.policy
        )
    except DoesNotFit as exc:
        raise ContextTooLarge(
            f"the {exc.block_id} messages need {exc.tokens} tokens but only {exc.limit} are left "
            f"for them ({budget.explain()}); shorten them or use a model with a larger window",
            param="messages",
        ) from None
    if not result.changed:
        return Plan(body, budget, result.tokens_before, result.tokens_after, [], counted, result)
    trimmed = orjson.dumps({**payload, "messages": result.messages})
    return Plan(
        trimmed, budget, result.tokens_before, result.tokens_after, result.actions, counted, result
    )


def shrunk_budget(plan: Plan, overflow: Overflow, shrink: float) -> tuple[Budget, int | None]:
    """A smaller budget after an upstream overflow, and the window learned (in our tokens).

    When the upstream says its limit and its count, the ratio between its count and ours tells
    how its tokenizer compares to our counter; the window is rescaled by it. Otherwise the budget
    shrinks by ``shrink``. Either way it ends below what was just sent, so each retry progresses.
    """
    assert plan.budget is not None and plan.tokens_after is not None
    budget = plan.budget
    sent = plan.tokens_after
    cut = math.floor(sent * (1 - shrink))
    learned: int | None = None
    if overflow.limit and overflow.prompt:
        scale = max(1.0, overflow.prompt / max(1, sent + budget.tools))
        learned = math.floor(overflow.limit / scale)
        reserve = max(budget.reserve, overflow.completion or 0)
        from_window = math.floor((learned - reserve - budget.tools - budget.margin) * 0.98)
        if from_window < sent:
            cut = from_window
    window = cut + budget.reserve + budget.tools + budget.margin
    return Budget(min(window, budget.window), budget.reserve, budget.tools, budget.margin), learned
