"""A plan: the body to forward and what the headers say about it, and how a fit becomes one
(``plan_of_fit``: the original bytes when nothing changed, the output limit alone, or the kept
messages written back in the request's format, offering the recall tool).

The planner (proxy/request/planning/planner.py) makes plans; the request path forwards them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.formats.recall import offer, reserved
from proxy.request.budget import settled
from proxy.request.planning.planner_state import Attempt
from proxy.request.recall import RecallMemory, originals, recall_key
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.engine import Fit


@dataclass(kw_only=True, slots=True)
class Plan:
    """A body to send and what the headers say about it."""

    body: bytes
    budget: Budget | None
    tokens_before: int | None = None
    tokens_after: int | None = None
    actions: list[str] = field(default_factory=list)
    counted: str = "exact"
    fit: Fit | None = None
    checkpoint: str | None = None  # "created <id>", "reused <id>", "session-memory"
    far: bool = False  # counted, though the byte bound alone put it far under the limit
    # The name the body offers the recall tool as (proxy/request/recall.py); None: not offered.
    recall: str | None = None

    @property
    def near(self) -> bool:
        """Whether the prompt may be near the limit: only then may the next request of its
        conversation be trimmed (and its fingerprint is worth the store)."""
        return self.counted != "bound" and not self.far

    @property
    def prompts(self) -> tuple[int, int] | None:
        """(as sent, as forwarded) prompt tokens, tool definitions included; None when the
        request was not fitted."""
        if self.budget is None or self.tokens_after is None:
            return None
        tools = self.budget.tools
        return (self.tokens_before or self.tokens_after) + tools, self.tokens_after + tools

    @property
    def counted_prompt(self) -> int | None:
        """The forwarded prompt's tokens when the proxy counted them (not the fast path's
        upper bound)."""
        if self.counted not in ("exact", "estimate") or self.prompts is None:
            return None
        return self.prompts[1]


def plan_of_fit(
    attempt: Attempt, budget: Budget, result: Fit, actions: list[str], checkpoint: str | None
) -> Plan:
    """The plan that forwards ``result`` (of ``attempt``, to ``budget``; ``actions``: what
    made it, the summary's with the fit's): the original bytes when nothing changed."""
    req, before = attempt.req, attempt.before
    recalls, dry_run = attempt.planner.recalls, attempt.dry_run
    counted = "exact" if req.spec.pricing.exact else "estimate"
    output = settled(req, budget, result.tokens_after)
    payload = req.payload
    if output is not None:
        payload = output[0]
        actions.append(output[1])
    if not actions:
        return Plan(
            body=req.body,
            budget=budget,
            tokens_before=before,
            tokens_after=result.tokens_after,
            actions=[],
            counted=counted,
            fit=result,
        )
    if len(actions) == 1 and output is not None:  # only the output limit changed
        return Plan(
            body=orjson.dumps(payload),
            budget=budget,
            tokens_before=before,
            tokens_after=result.tokens_after,
            actions=actions,
            counted=counted,
            fit=result,
        )
    written = req.fmt.write(payload, req.view, result.messages)
    offered = _recalling(req, result.messages, written, recalls, dry_run)
    trimmed = orjson.dumps(offered[0] if offered else written)
    plan = Plan(
        body=trimmed,
        budget=budget,
        tokens_before=before,
        tokens_after=result.tokens_after,
        actions=actions,
        counted=counted,
        fit=result,
        checkpoint=checkpoint,
    )
    plan.recall = offered[1] if offered else None
    return plan


def _recalling(
    req: WireRequest,
    kept: list[Any],
    written: dict[str, Any],
    recalls: RecallMemory | None,
    dry_run: bool,
) -> tuple[dict[str, Any], str] | None:
    """Under a policy with ``recall``, the originals of the outputs ``kept`` names handles
    for are kept (in ``recalls``), and the payload to forward offers the recall tool, with the
    name it offers it as: the client request's reserved name (None: not offered)."""
    if not req.policy.config.recall:
        return None
    found = originals(req.view.messages, kept)
    if not found:
        return None
    if recalls is not None and not dry_run and not req.shadow:  # a shadow plan is never sent
        recalls.keep(recall_key(req), found, req.owner)
    if not req.offer_recall:
        return None
    name = req.recall_name or reserved(req.body, req.payload)
    offered = offer(req.fmt, written, name)
    return None if offered is None else (offered, name)
