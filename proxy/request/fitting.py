"""How a request is made to fit, by kind of body: the first plan, and what the overflow retry
needs to fit it again (a budget for a window, a re-fit, an exact recount, a calibration sample).

    ConversationFitting  chat, Responses, Messages: the planner and the engine over the view
    PromptFitting        legacy completions: prompts cut at token boundaries (formats/completions)

The request path (proxy/edge/exchange.py) takes either, so every format shares its edge,
fallbacks, retry, headers and metrics.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import orjson

from proxy.errors import BadRequest, Invariant
from proxy.formats.completions import COMPLETIONS, DEFAULT_MAX_TOKENS, Prompts, codec_for
from proxy.providers.registry import provider_of
from proxy.request.budget import budget_for, checked, output_floor
from proxy.request.planning.off_loop import off_loop
from proxy.request.planning.plan import Plan
from proxy.windows.calibration import Sample
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.tokens import count_prompt

if TYPE_CHECKING:
    from proxy.config.settings import Trimming
    from proxy.request.planning.planner import Planner


class Fitting(Protocol):
    conversation: bool  # a conversation whose prefix the proxy tracks
    lowers_output: bool  # the retry may lower the request's reply limit

    async def first(self, dry_run: bool = False) -> Plan:
        """The first plan; ``dry_run``: no summarizer call, nothing stored (a plan to choose
        by, which may be thrown away)."""
        ...

    async def refit(self, budget: Budget) -> Plan: ...

    def budget_for(self, window: int) -> Budget: ...

    def recount(self) -> int: ...

    def with_output(self, plan: Plan, limit: int) -> Plan | None:
        """``plan`` with the reply limit the client asked for lowered to ``limit``; None when
        there is none to lower."""
        ...

    def sample(self, theirs: int, plan: Plan) -> Sample | None:
        """The upstream's count of what ``plan`` forwarded beside the proxy's, as a
        calibration sample, or None when the two do not compare."""
        ...


def fitting_for(planner: Planner, trimming: Trimming, req: WireRequest) -> Fitting:
    if req.fmt is COMPLETIONS:
        return PromptFitting(req, trimming.safety_margin_tokens)
    return ConversationFitting(planner, trimming, req)


async def first_plan(
    planner: Planner, trimming: Trimming, req: WireRequest, dry_run: bool = False
) -> Plan:
    """``req``'s first plan, by its kind of body (for a fallback model's request too)."""
    return await fitting_for(planner, trimming, req).first(dry_run)


class ConversationFitting:
    conversation = True

    def __init__(self, planner: Planner, trimming: Trimming, req: WireRequest) -> None:
        self.planner, self.trimming, self.req = planner, trimming, req
        self.lowers_output = output_floor(req, req.fmt.requested_output(req.payload)) is not None

    async def first(self, dry_run: bool = False) -> Plan:
        return await self.planner.plan_first(self.req, dry_run=dry_run)

    async def refit(self, budget: Budget) -> Plan:
        return await self.planner.plan_fitted(self.req, budget)

    def budget_for(self, window: int) -> Budget:
        return budget_for(self.req, window, self.trimming)

    def recount(self) -> int:
        return count_prompt(self.req.counter(), self.req.view.messages)

    def sample(self, theirs: int, plan: Plan) -> Sample | None:
        return sample_of(self.req, plan, theirs)

    def with_output(self, plan: Plan, limit: int) -> Plan | None:
        """``plan``'s body with the reply limit the client asked for lowered to ``limit``;
        None when it asked for none, the policy keeps it, or the format cannot take it (a
        thinking budget must stay under the limit)."""
        req = self.req
        if not req.policy.config.lower_max_tokens or req.fmt.requested_output(req.payload) is None:
            return None
        payload = req.fmt.with_output(orjson.loads(plan.body), limit)
        thinking = payload.get("thinking")
        budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        if isinstance(budget, int) and budget >= limit:
            return None
        return replace(plan, body=orjson.dumps(payload), actions=list(plan.actions))


def sample_of(req: WireRequest, plan: Plan, theirs: int) -> Sample:
    """``theirs`` beside the proxy's count of what ``plan`` forwarded, unweighted (as the
    request's counter weighed it: proxy/windows/calibration.py), with how much of it the view
    hides and how many messages it held."""
    if plan.tokens_after is None:
        raise Invariant("a sent plan is counted")
    forwarded = plan.fit.messages if plan.fit is not None else req.view.messages
    hidden = req.view.hidden_tokens(req.spec.pricing.counter, forwarded)
    weighted = plan.tokens_after + (plan.budget.tools if plan.budget else 0)
    extra = round(req.message_weight) * len(forwarded)
    ours = max(1, weighted - extra - round(req.hidden_weight * hidden) + hidden)
    tools = min(plan.budget.tools if plan.budget else 0, ours - min(hidden, ours))
    return Sample(
        theirs=theirs, ours=ours, hidden=min(hidden, ours), messages=len(forwarded), tools=tools
    )


class PromptFitting:
    conversation = False
    lowers_output = False

    def __init__(self, req: WireRequest, margin: int) -> None:
        if req.session_memory:
            raise BadRequest(
                "session memory is a chat conversation's summary; /v1/completions has none",
                param="contextwarden.session_memory",
            )
        upstream = req.spec.route.upstream
        if not provider_of(upstream).serves_completions or upstream.base_url is None:
            raise BadRequest("/v1/completions is only served by an OpenAI-compatible upstream")
        self.req, self.margin = req, margin
        self.prompts = Prompts(
            req.body, req.payload, codec_for(req.spec), req.policy.config.completions
        )

    async def first(self, dry_run: bool = False) -> Plan:  # a cut calls nothing, stores nothing
        if not self.req.trim:
            return Plan(
                body=self.req.body, budget=None, actions=["trimming-disabled"], counted="none"
            )
        if not self.req.window:
            return Plan(body=self.req.body, budget=None, actions=["unknown-window"], counted="none")
        return await self.refit(self.budget_for(self.req.window))

    async def refit(self, budget: Budget) -> Plan:
        # Cutting tokenizes each prompt: a large body's cut runs in a worker thread.
        return await off_loop(len(self.req.body), self.plan, budget)

    def plan(self, budget: Budget) -> Plan:
        cut = self.prompts.cut(budget)
        return Plan(
            body=cut.body,
            budget=budget,
            tokens_before=cut.before,
            tokens_after=cut.after,
            actions=cut.actions,
            counted=cut.counted,
        )

    def budget_for(self, window: int) -> Budget:
        """Each prompt's budget: the window less the completion it asks for (16 when absent,
        as the API does) and the margin."""
        asked = COMPLETIONS.requested_output(self.req.payload)
        return checked(
            Budget(window=window, reserve=asked or DEFAULT_MAX_TOKENS, tools=0, margin=self.margin)
        )

    def recount(self) -> int:
        return self.prompts.cut(self.budget_for(10**9)).after

    def with_output(self, plan: Plan, limit: int) -> Plan | None:
        return None  # a prompt over its window is cut, as the API's own limit allows

    def sample(self, theirs: int, plan: Plan) -> Sample | None:
        """One prompt's count (a batch's usage sums prompts each planned on its own)."""
        sent = plan.tokens_after
        return Sample(theirs=theirs, ours=sent) if sent and not self.prompts.batch else None
