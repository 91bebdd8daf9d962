"""The planner: deciding what to forward, the original bytes when they fit, a compacted body
when not; every plan checked against the post-condition (proxy/request/planning/postcondition.py)
before it is written.

    plan_first     the first attempt (first_sight.py): pass-through, the byte-bound fast
                   path, the exact count; else plan_fitted's work
    plan_fitted    from the original transcript, never from an already degraded view, to a
                   budget (fit_to_budget.py): the overflow retry's entry point

A plan that breaks the post-condition is replaced by the safe plan (the cut to the full
budget: no sticky replay, no deep cut); should even that break it, the request goes as the
client sent it.
"""

from __future__ import annotations

import logging

from proxy.errors import ContextTooLarge, Invariant
from proxy.request.budget import budget_for
from proxy.request.planning.allowances import roomy
from proxy.request.planning.first_sight import first_sight
from proxy.request.planning.fit_to_budget import CutTo, cut
from proxy.request.planning.plan import Plan
from proxy.request.planning.planner_state import PlannerState, attempt_of
from proxy.request.planning.postcondition import violation
from proxy.request.planning.summary_context import summary_context
from proxy.request.sticky_cuts import sticky_key
from proxy.summaries import Context
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.tokens import MemoCounter

log = logging.getLogger("contextwarden.plan")


class Planner(PlannerState):
    """The planner's entry points, over what it draws on between requests (``PlannerState``:
    ``Planner(settings, compactor, prefixes, cuts, recalls)``)."""

    async def plan_first(
        self, req: WireRequest, exact: bool = False, dry_run: bool = False
    ) -> Plan:
        """Plan the first attempt; raises ContextTooLarge when nothing can make it fit.

        ``exact`` skips the byte-bound fast path (the preview always counts); ``dry_run`` (the
        preview) calls no summarizer and writes nothing. The plan keeps the post-condition
        (proxy/request/planning/postcondition.py)."""
        plan = await first_sight(self, req, exact, dry_run)
        return await self._guarded(req, plan, dry_run)

    async def plan_fitted(
        self,
        req: WireRequest,
        budget: Budget,
        tokens: int | None = None,
        memo: MemoCounter | None = None,
        dry_run: bool = False,
    ) -> Plan:
        """Compact (checkpoint, then the engine's fit) from the original messages, to
        ``budget``: the overflow retry's entry point, always from the original transcript,
        never from an already degraded view. What must be kept gets what the window holds,
        as on the first plan's last resort (allowances.py: ``roomy``): a newest step the
        window cannot hold whole has its outputs cut, and a reply reserve is shared with
        them when the instructions leave less (Codex's default model at a 16k window
        unlisted, whose window the refusals teach). The plan keeps the post-condition."""
        attempt = attempt_of(self, req, tokens, memo, dry_run)
        plan = await roomy(attempt, budget, cut_newest=True)
        return await self._guarded(req, plan, dry_run)

    def budget(self, req: WireRequest, window: int) -> Budget:
        return budget_for(req, window, self.settings.trimming)

    def summary_context(self, req: WireRequest, budget: Budget) -> Context:
        """What the summarizer needs of ``req`` for a summary of its own (a client's
        compaction answered by the proxy: proxy/request/compaction.py)."""
        return summary_context(self.settings, req, budget, MemoCounter(req.counter()))

    async def _guarded(self, req: WireRequest, plan: Plan, dry_run: bool) -> Plan:
        """``plan`` when it keeps the post-condition; else the safe plan (the cut to the full
        budget: no replay, no deep cut), counted as a fallback. Should even that break it, the
        request goes as the client sent it: never worse than no proxy."""
        reason = broken(req, plan)
        if reason is None:
            return plan
        log.warning("plan fallback (%s): %s for model %s", reason, plan.actions, req.spec.name)
        safe = await self._safe(req, plan, dry_run)
        if safe is None or broken(req, safe) is not None:
            safe = Plan(
                body=req.body,
                budget=plan.budget,
                tokens_before=plan.tokens_before,
                tokens_after=plan.tokens_before,
                actions=[],
            )
            safe.counted = plan.counted
            reason = f"{reason}-unsafe"
        safe.actions.append(f"plan-fallback {reason}")
        return safe

    async def _safe(self, req: WireRequest, plan: Plan, dry_run: bool) -> Plan | None:
        """The cut to the budget ``plan`` was made for, from the original messages, with no
        sticky replay and no deeper target (its cut is remembered, so the next requests replay
        it); None when even that does not fit."""
        if plan.budget is None:
            raise Invariant("a plan re-fitted without its budget")
        attempt = attempt_of(self, req, plan.tokens_before, MemoCounter(req.counter()), dry_run)
        sticky = None if dry_run else sticky_key(self.cuts, req)
        budget = plan.budget
        to = CutTo(budget=budget, full=budget, sticky=sticky, cut_newest=True)
        try:  # the last resort included: a newest step too large is cut, not sent whole
            return await cut(attempt, to)
        except ContextTooLarge:
            return None


def broken(req: WireRequest, plan: Plan) -> str | None:
    """The promise of the post-condition ``plan`` breaks
    (proxy/request/planning/postcondition.py)."""
    kept = plan.fit.messages if plan.fit is not None else None
    return violation(req, kept, plan.actions, plan.tokens_after, plan.budget)
