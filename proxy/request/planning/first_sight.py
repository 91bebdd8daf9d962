"""A request's first sight: what the proxy decides before it fits anything.

- no window known, trimming off, or a stateful request (the server holds history the proxy
  cannot see): the request passes through (Responses' ``truncation: "auto"`` when the policy
  asks for it);
- the byte-bound fast path: a body whose bytes alone bound its tokens under the soft limit
  goes as it is, uncounted;
- else the exact count (the conversation's last counts reused for the same messages,
  proxy/request/reused_counts.py): over the budget, the fitted plan (allowances.py); over the soft
  limit, the next summary prepared in the background (deep_cuts.py); else the original bytes,
  with the output limit settled.
"""

from __future__ import annotations

import math

import orjson

from proxy.formats.reused_items import entry_bytes
from proxy.request.budget import budget_for, settled
from proxy.request.conversations import key_of
from proxy.request.planning.allowances import fitted_or_uncertain
from proxy.request.planning.deep_cuts import prepare
from proxy.request.planning.off_loop import off_loop, work_of
from proxy.request.planning.plan import Plan
from proxy.request.planning.planner_state import PlannerState, attempt_of
from proxy.summaries.decision import on_request, soft_limit, summarizes
from proxy.wire import WireRequest
from strategies.budget import Budget, byte_bound
from strategies.tokens import MemoCounter, each_message


async def first_sight(planner: PlannerState, req: WireRequest, exact: bool, dry_run: bool) -> Plan:
    """The first plan, before the post-condition's check (proxy/request/planning/planner.py)."""
    if req.window is None:
        return Plan(body=req.body, budget=None, actions=["unknown-window"], counted="none")
    if not req.trim:
        return Plan(body=req.body, budget=None, actions=["trimming-disabled"], counted="none")
    if req.fmt.stateful(req.payload):
        return _stateful(req)
    budget = budget_for(req, req.window, planner.settings.trimming)
    pricing = req.spec.pricing
    counter = req.counter()
    messages = req.view.messages
    # Each wire item beyond the view's messages may add its own overhead to the count.
    items = max(0, req.view.items - len(messages)) * 8
    soft = _soft_limit(planner, req, budget)
    # The bound is the body's bytes scaled, plus overheads: a body over the soft limit on its
    # bytes alone is counted, without a walk over its messages for the overheads.
    bound = math.ceil((len(req.body) + items) * pricing.tokens_per_byte) + counter.priming
    if bound <= soft:
        bound = byte_bound(
            len(req.body) + items,
            messages,
            pricing.tokens_per_byte,
            pricing.worst_image,
            counter.priming,
        )
    fast = bound <= soft and settled(req, budget, bound) is None
    if fast and not req.policy.engine.repair_tool_calls and not exact and not req.sampled:
        return Plan(
            body=req.body, budget=budget, tokens_before=bound, tokens_after=bound, counted="bound"
        )
    memo = MemoCounter(counter)
    key, model, fmt = _recent_key(req), req.spec.pricing.counter, req.fmt.name
    known = planner.recent.seed(key, model, messages, memo)
    fresh = work_of(req) if known else len(req.body)  # none known: every message is tokenized
    rest = messages[len(known) :] if known else messages
    counts = known + await off_loop(fresh, each_message, memo, rest)
    tokens = sum(counts) + memo.priming
    planner.recent.keep(key, model, messages, counts, entry_bytes(fmt, len(req.body), len(counts)))
    if tokens > budget.messages or req.policy.engine.repair_tool_calls:
        attempt = attempt_of(planner, req, tokens, memo, dry_run)
        return await fitted_or_uncertain(attempt, budget)
    config = req.policy.config
    step = on_request(tokens, budget.messages, config, req.session_memory, req.client_compaction)
    if step == "prepare" and planner.compactor is not None and not dry_run:
        await prepare(planner, req, budget, tokens, memo)
    counted = "exact" if pricing.exact else "estimate"
    output = settled(req, budget, tokens)
    if output is None:
        return Plan(
            body=req.body,
            budget=budget,
            tokens_before=tokens,
            tokens_after=tokens,
            counted=counted,
            far=fast,
        )
    body = orjson.dumps(output[0])
    return Plan(
        body=body,
        budget=budget,
        tokens_before=tokens,
        tokens_after=tokens,
        actions=[output[1]],
        counted=counted,
        far=fast,
    )


def _stateful(req: WireRequest) -> Plan:
    """The server holds history the proxy cannot see, so it cannot count or trim it: the
    policy passes the request through, or asks the server to truncate (Responses'
    ``truncation: "auto"``). Either way the report says ``stateful``."""
    if req.policy.config.stateful != "truncation_auto" or "truncation" in req.payload:
        return Plan(body=req.body, budget=None, actions=["stateful"], counted="none")
    body = orjson.dumps({**req.payload, "truncation": "auto"})
    return Plan(body=body, budget=None, actions=["stateful", "truncation-auto"], counted="none")


def _soft_limit(planner: PlannerState, req: WireRequest, budget: Budget) -> int:
    """Past this count a request is counted (not sent on its byte bound): a summary may be
    due (proxy/summaries/decision.py)."""
    config = req.policy.config
    if planner.compactor is None or not summarizes(config, req.session_memory):
        return budget.messages
    return soft_limit(budget.messages, config)


def _recent_key(req: WireRequest) -> tuple[str, str, str, float, float]:
    """Whose last counts a request may reuse (proxy/request/reused_counts.py): its conversation's,
    in its format, for its model as calibrated."""
    conversation = key_of(req)
    return conversation, req.fmt.name, req.spec.name, req.hidden_weight, req.message_weight
