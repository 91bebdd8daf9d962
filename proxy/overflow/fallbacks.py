"""Context-window fallbacks, as LiteLLM users know them: a policy names larger-window models
(``fallbacks: [claude-sonnet-4-5-1m, gpt-4.1]``) to send a request to when it cannot be made to
fit its own model, or (``fallback_on_loss: 0.5``) when fitting it would drop more than that
share of its tokens.

Each fallback is tried in order, as if the client had asked for it: the team must be allowed the
model, its upstream must serve the format, and it is planned by its own window and policy. The
first that fits answers; the actions header says ``fallback <asked>-><answered>`` and
``x-contextwarden-model`` names the model that answered, as do the metrics and the access log.
When none fits, the asked model's own refusal (or its trimmed plan) stands.

A caller's own credential (passthrough) goes only to the upstream of the model it asked for: a
fallback on another upstream is sent with that upstream's own key, and one whose upstream holds
none is not tried for a caller that brought a credential (``proxy/config/credentials.py``
refuses such a config at start-up).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson

from proxy.errors import ContextTooLarge, Invariant, ProxyError
from proxy.providers.registry import provider_of
from proxy.request.planning.plan import Plan
from proxy.wire import WireRequest

Build = Callable[[bytes], Awaitable[WireRequest]]
PlanFirst = Callable[[WireRequest, bool], Awaitable[Plan]]  # (request, dry run)


def loses(plan: Plan) -> float:
    """The share of the request's tokens its plan drops (0 when it goes whole)."""
    before, after = plan.tokens_before, plan.tokens_after
    if not plan.actions or not before or after is None:
        return 0.0
    return max(0.0, 1 - after / before)


def reachable(req: WireRequest, alt: WireRequest) -> bool:
    """Whether ``alt`` (a fallback of ``req``) can be sent without the caller's credential
    leaving the upstream it addressed; ``alt`` keeps whose request it is."""
    alt.credential, alt.addressed = req.credential, req.addressed
    route = alt.spec.route
    if req.credential is None or route.name == req.addressed:
        return True
    upstream = route.upstream
    own = provider_of(upstream).own_credentials
    return bool(route.key or upstream.header_credentials or own)


async def plan_with_fallbacks(
    req: WireRequest, body: bytes, build: Build, plan_first: PlanFirst
) -> tuple[WireRequest, Plan]:
    """The request and its plan: its own model's, or the first fallback's that fits better.

    With ``fallback_on_loss`` the choice is made on dry runs (no summarizer call, nothing
    stored): a summary made for a model that is then passed over was paid for and thrown
    away. The chosen model is then planned for real."""
    config = req.policy.config
    share = config.fallback_on_loss
    choosing = share is not None and bool(config.fallbacks)
    refused: ContextTooLarge | None = None
    plan: Plan | None = None
    try:
        plan = await plan_first(req, choosing)
    except ContextTooLarge as exc:
        if not config.fallbacks:
            raise
        refused = exc
    if plan is not None and (share is None or loses(plan) <= share):
        return req, await plan_first(req, False) if choosing else plan
    payload = orjson.loads(body)
    for name in config.fallbacks:
        try:
            alt = await build(orjson.dumps({**payload, "model": name}))
            if not reachable(req, alt):
                continue
            alt_plan = await plan_first(alt, choosing)
            if share is not None and loses(alt_plan) > share and plan is not None:
                continue
            if choosing:
                alt_plan = await plan_first(alt, False)
        except ProxyError:
            continue  # not allowed, not served in this format, or too small as well
        alt_plan.actions.append(f"fallback {req.spec.name}->{name}")
        return alt, alt_plan
    if plan is None:
        raise refused or Invariant("no plan and no refusal")
    return req, await plan_first(req, False) if choosing else plan
