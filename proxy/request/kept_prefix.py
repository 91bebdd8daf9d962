"""What a forwarded prompt kept of its conversation's previous one (its cached prefix), and what
it cost as sent and as forwarded: for the request path's metrics (proxy/edge/exchange.py) and
for a shadow plan's, of the prompt it would have forwarded (proxy/edge/shadow.py), both
recorded as one ``outcome_of`` so that the projected and the enforced figures are alike.
"""

from __future__ import annotations

from proxy.observe.outcome import Outcome
from proxy.request.conversations import Forwarded, PrefixTracker, Seen, key_of
from proxy.request.planning.plan import Plan
from proxy.wire import WireRequest
from strategies.cost import PromptCosts, PromptSizes, prompt_costs


async def see_prefix(prefixes: PrefixTracker, req: WireRequest, plan: Plan) -> Seen | None:
    """Whether the forwarded prompt keeps its conversation's previous one as its prefix (see
    proxy/request/conversations.py); None when the proxy did not fit the request (unknown window,
    stateful)."""
    if plan.prompts is None:
        return None
    sent, tokens = plan.prompts
    forwarded = plan.fit.messages if plan.fit is not None and plan.actions else req.view.messages
    key = key_of(req)
    near = plan.near  # a prompt far from the limit needs no store round trip
    return await prefixes.see(key, Forwarded(forwarded, tokens, sent), near, req.owner)


def costs_of(req: WireRequest, plan: Plan, seen: Seen | None) -> PromptCosts | None:
    """The prompt's estimated cost as sent, as forwarded and unbroken (strategies/cost.py),
    when the model has prices."""
    prices = req.spec.prices
    if prices is None or seen is None or plan.prompts is None:
        return None
    sent, forwarded = plan.prompts
    kept = seen.state == "kept"
    now = PromptSizes(sent=sent, forwarded=forwarded)
    previous = PromptSizes(sent=seen.previous_sent, forwarded=seen.previous_tokens)
    return prompt_costs(prices, now, previous, kept)


def outcome_of(req: WireRequest, plan: Plan, seen: Seen | None, status: int) -> Outcome:
    """What ``req`` did under ``plan`` (answered with ``status``), for metrics and the access
    log; its retries and times are the caller's to set (none for a shadow plan)."""
    return Outcome(
        team=req.team,
        model=req.spec.name,
        status=status,
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_after,
        actions=plan.actions,
        retries=0,
        checkpoint=plan.checkpoint,
        overhead=0.0,
        upstream=0.0,
        stream=bool(req.payload.get("stream")),
        policy=req.policy.name,
        path=req.fmt.path,
        format=req.fmt.name,
        prefix=seen.state if seen else None,
        cached_tokens=seen.cached_tokens if seen else 0,
        costs=costs_of(req, plan, seen),
    )
