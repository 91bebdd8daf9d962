"""Deciding what to forward: the original bytes when they fit, a compacted body when not.

plan_first     budget; byte-bound fast path; exact count; pre-compaction over the soft
               threshold; else plan_fitted
plan_fitted    summary checkpoint (reused or created) when the policy summarizes, then the
               engine's fit; also the overflow retry's entry point, always from the original
               transcript, never from an already degraded view

Cache economy: under a policy that cuts cache-friendly, the engine is given the conversation's
last forwarded prompt (proxy/request/conversations.py) and prefers a cut on the cache grid to passes
that would rewrite it (strategies/engine.py: keeps_prefix). For a model with prices, a cut goes
deep enough for the cache-write premium to be paid back by the cheap reads of the requests
before the next cut (strategies/cost.py: cut_share).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

import orjson

from proxy.config.settings import Settings
from proxy.errors import ContextTooLarge
from proxy.formats.recall import offer
from proxy.formats.reused_items import entry_bytes
from proxy.request.budget import budget_for, output_floor, settled
from proxy.request.conversations import (
    Fingerprint,
    PrefixTracker,
    extends,
    key_of,
    message_digest,
)
from proxy.request.postcondition import violation
from proxy.request.recall import RecallMemory, originals
from proxy.request.reused_counts import RecentCounts
from proxy.request.sticky_cuts import CutMemory
from proxy.summaries import Compactor, Context
from proxy.summaries.decision import on_request, soft_limit, summarizes
from proxy.summaries.llm import target_for
from proxy.wire import WireRequest
from strategies.budget import Budget, byte_bound
from strategies.cost import cut_share
from strategies.engine import Fit, fit
from strategies.errors import DoesNotFit
from strategies.messages import last_user_index
from strategies.protected import protected
from strategies.repair import repair_tool_calls
from strategies.rules import pinned_ids
from strategies.standing import standing_ids
from strategies.sticky import record, replay
from strategies.tokens import MemoCounter, count_prompt, each_message

T = TypeVar("T")
log = logging.getLogger("contextwarden.plan")


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
    checkpoint: str | None = None  # "created <id>", "reused <id>", "session-memory"
    far: bool = False  # counted, though the byte bound alone put it far under the limit
    recall: bool = False  # the body offers the recall tool (proxy/request/recall.py)

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


class Planner:
    def __init__(
        self,
        settings: Settings,
        compactor: Compactor | None,
        prefixes: PrefixTracker | None = None,
        cuts: CutMemory | None = None,
        recalls: RecallMemory | None = None,
    ) -> None:
        self.settings = settings
        self.compactor = compactor
        self.prefixes = prefixes
        self.cuts = cuts
        self.recalls = recalls
        self.recent = RecentCounts()

    async def plan_first(
        self, req: WireRequest, exact: bool = False, dry_run: bool = False
    ) -> Plan:
        """Plan the first attempt; raises ContextTooLarge when nothing can make it fit.

        ``exact`` skips the byte-bound fast path (the preview always counts); ``dry_run`` (the
        preview) calls no summarizer and writes nothing. The plan keeps the post-condition
        (proxy/request/postcondition.py)."""
        plan = await self._first(req, exact, dry_run)
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
        never from an already degraded view. The plan keeps the post-condition."""
        plan = await self._fitted(req, budget, tokens, memo, dry_run)
        return await self._guarded(req, plan, dry_run)

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
            safe = Plan(req.body, plan.budget, plan.tokens_before, plan.tokens_before, [])
            safe.counted = plan.counted
            reason = f"{reason}-unsafe"
        safe.actions.append(f"plan-fallback {reason}")
        return safe

    async def _safe(self, req: WireRequest, plan: Plan, dry_run: bool) -> Plan | None:
        """The cut to the budget ``plan`` was made for, from the original messages, with no
        sticky replay and no deeper target (its cut is remembered, so the next requests replay
        it); None when even that does not fit."""
        assert plan.budget is not None
        counter = MemoCounter(req.counter())
        before = plan.tokens_before
        if before is None:
            before = count_prompt(counter, req.view.messages)
        sticky = None if dry_run else self._sticky_key(req)
        budget = plan.budget
        try:
            return await self._cut(req, budget, budget, before, counter, None, sticky, dry_run)
        except ContextTooLarge:
            return None

    async def _first(self, req: WireRequest, exact: bool, dry_run: bool) -> Plan:
        if req.window is None:
            return Plan(req.body, None, actions=["unknown-window"], counted="none")
        if not req.trim:
            return Plan(req.body, None, actions=["trimming-disabled"], counted="none")
        if req.fmt.stateful(req.payload):
            return self._stateful(req)
        budget = self.budget(req, req.window)
        pricing = req.spec.pricing
        counter = req.counter()
        messages = req.view.messages
        # Each wire item beyond the view's messages may add its own overhead to the count.
        items = max(0, req.view.items - len(messages)) * 8
        soft = self._soft_limit(req, budget)
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
            return Plan(req.body, budget, bound, bound, counted="bound")
        memo = MemoCounter(counter)
        key, model, fmt = self._recent_key(req), req.spec.pricing.counter, req.fmt.name
        known = self.recent.seed(key, model, messages, memo)
        fresh = req.fresh if known else len(req.body)  # none known: every message is tokenized
        rest = messages[len(known) :] if known else messages
        counts = known + await off_loop(fresh, each_message, memo, rest)
        tokens = sum(counts) + memo.priming
        self.recent.keep(key, model, messages, counts, entry_bytes(fmt, len(req.body), len(counts)))
        if tokens > budget.messages or req.policy.engine.repair_tool_calls:
            return await self._fitted_or_uncertain(req, budget, tokens, memo, dry_run)
        step = on_request(tokens, budget.messages, req.policy.config, req.session_memory)
        if step == "prepare" and self.compactor is not None and not dry_run:
            await self._prepare(req, budget, tokens, memo)
        counted = "exact" if pricing.exact else "estimate"
        output = settled(req, budget, tokens)
        if output is None:
            return Plan(req.body, budget, tokens, tokens, counted=counted, far=fast)
        body = orjson.dumps(output[0])
        return Plan(body, budget, tokens, tokens, [output[1]], counted, far=fast)

    async def _fitted_or_uncertain(
        self, req: WireRequest, budget: Budget, tokens: int, memo: MemoCounter, dry_run: bool
    ) -> Plan:
        """The fitted plan. A request is refused only when even what must be kept cannot fit
        the window by the most favourable count, beside the output limit the client asked
        for. A reply reserve the client did not ask for, or a limit it asked for that the
        policy may lower, shrinks to what the window leaves by the proxy's own count
        (``_roomy``). For a model the proxy only estimates, the estimate's known error (it
        counts up to ``estimate_ratio`` times what the model does) is given to it first: the
        request goes, fitted to the window that error allows, and the upstream decides (its
        overflow error states its own figures, and the retry fits to those: never worse than
        no proxy, which would have forwarded it whole); a large reply limit it asked for is
        lowered to what the window itself leaves by the proxy's count (``within``). The one
        exception: a large limit the policy lowers, once the upstream has calibrated the count,
        gives way first (``_roomy`` at the window itself) and the allowance comes only when
        that cannot hold what must be kept: a prompt fitted to the loose window leaves the
        reply nothing whenever the count is right (a Claude Code session: a refusal and a
        retry per request, each retry's reply limited to a few hundred tokens). A team's
        ``max_context_tokens`` is a hard cap: no allowance is given past it."""
        try:
            return await self._fitted(req, budget, tokens, memo, dry_run)
        except ContextTooLarge as certain:
            loose = self._loose(req, budget)
            asked = req.fmt.requested_output(req.payload)
            # A large reply limit the policy lowers gives way first, once the count is known.
            giving = req.calibrated and output_floor(req, asked) is not None
            if loose is not None and not giving:
                plan = await self._uncertain(req, budget, loose, tokens, memo, dry_run)
                if plan is not None:
                    return plan
            try:
                return await self._roomy(req, budget, tokens, memo, dry_run)
            except ContextTooLarge:
                pass
            if loose is not None and giving:
                plan = await self._uncertain(req, budget, loose, tokens, memo, dry_run)
                if plan is not None:
                    return plan
            raise certain from None

    def _loose(self, req: WireRequest, budget: Budget) -> Budget | None:
        """``budget`` with the estimate's known error given to its window (never past a team's
        cap); None for an exact count, or when that gives nothing."""
        loose_window = math.floor(budget.window * self.settings.trimming.estimate_ratio)
        if req.cap is not None:
            loose_window = min(loose_window, req.cap)
        if req.spec.pricing.exact or loose_window <= budget.window:
            return None
        return replace(budget, window=loose_window)

    async def _uncertain(
        self,
        req: WireRequest,
        budget: Budget,
        loose: Budget,
        tokens: int,
        memo: MemoCounter,
        dry_run: bool,
    ) -> Plan | None:
        """The plan fitted to the ``loose`` window, its large asked limit set by ``budget``'s
        own (``within``); None when even the loose window cannot hold what must be kept."""
        try:
            plan = await self._roomy(req, loose, tokens, memo, dry_run)
        except ContextTooLarge:
            return None
        plan = within(req, budget, plan)
        plan.actions.append("uncertain-forwarded")
        return plan

    async def _roomy(
        self, req: WireRequest, budget: Budget, tokens: int, memo: MemoCounter, dry_run: bool
    ) -> Plan:
        """The fitted plan; when what must be kept does not fit beside a reply reserve the
        client did not ask for, the reserve (then the safety margin) shrinks by what is
        missing, as often as that helps: the upstream takes a prompt that leaves less room for
        the reply, so the proxy does too."""
        while True:
            try:
                return await self._fitted(req, budget, tokens, memo, dry_run)
            except ContextTooLarge as exc:
                roomier = self._roomier(req, budget, exc)
                if roomier is None:
                    raise
                budget = roomier

    def _roomier(self, req: WireRequest, budget: Budget, exc: ContextTooLarge) -> Budget | None:
        """``budget`` with its reserve (then its margin) shrunk by what ``exc`` says is missing
        for what must be kept; None when nothing is left to shrink, or the reply limit the
        client asked for is its own (``lower_max_tokens: false``). An asked limit is lowered
        (``settled`` writes it) to 1 at the least; a reserve the client did not ask for, to 0."""
        asked = req.fmt.requested_output(req.payload)
        if exc.kept is None or (asked is not None and not req.policy.config.lower_max_tokens):
            return None
        least = 0 if asked is None else 1
        missing = exc.kept - budget.messages
        if missing <= 0 or budget.reserve + budget.margin <= least:
            return None
        reserve = max(least, budget.reserve - missing)
        margin = max(0, budget.margin - (missing - (budget.reserve - reserve)))
        return replace(budget, reserve=reserve, margin=margin)

    async def _fitted(
        self,
        req: WireRequest,
        budget: Budget,
        tokens: int | None = None,
        memo: MemoCounter | None = None,
        dry_run: bool = False,
    ) -> Plan:
        """Compact (checkpoint, then the engine's fit) from the original messages."""
        counter = memo or MemoCounter(req.counter())
        original = req.view.messages
        before = tokens if tokens is not None else count_prompt(counter, original)
        sticky = None if dry_run else self._sticky_key(req)
        if sticky is not None:
            replayed = await self._replay(req, sticky, budget, before, counter)
            if replayed is not None:
                return replayed
        last = None if dry_run else await self._last_prompt(req)
        deeper = None if sticky is None else self._deeper(req, budget, before, last, counter)
        if deeper is not None:
            # Cut deep enough that the next requests only append (they replay this cut); when
            # what must be kept does not fit that deep, the cut is made to the budget itself.
            try:
                return await self._cut(req, deeper, budget, before, counter, last, sticky, dry_run)
            except ContextTooLarge:
                pass
        return await self._cut(req, budget, budget, before, counter, last, sticky, dry_run)

    def _deeper(
        self,
        req: WireRequest,
        budget: Budget,
        before: int,
        last: Fingerprint | None,
        counter: MemoCounter,
    ) -> Budget | None:
        """The budget a fresh cut of a growing conversation aims at, leaving room for it to grow
        in while its next requests replay the cut: ``STICKY_REQUESTS`` times its growth per
        request (this prompt against the previous one the client sent), at least the policy's
        cache grid share of the budget, at most ``DEEPEST`` of it (``DEEPEST_STEPS`` in a
        running task, whose cuts drop whole steps and never summarize). None for a
        conversation not seen growing (it may be a one-off: it is cut to the budget, on the
        grid).

        The deeper target drops only history and completed steps: never the leading
        instructions, the task or its newest step (strategies/protected.py). Where those do
        not fit that deep, the target shrinks to what they take; where they take the whole
        budget, None: the plain cut."""
        # The last prompt's size counts its tool definitions (proxy/edge/exchange.py:
        # see_prefix), as the client sent it: compare like with like.
        sent = before + budget.tools
        if last is None or not 0 < last.sent < sent:
            return None
        growth = STICKY_REQUESTS * (sent - last.sent) / budget.messages
        deepest = DEEPEST_STEPS if req.view.atomic_current else DEEPEST
        share = min(max(req.policy.engine.cache_cut_share, growth), deepest)
        deeper = budget.messages - int(budget.messages * share)
        floor = self._current_tokens(req, counter)
        if floor >= budget.messages:
            return None
        return replace(budget, margin=budget.margin + budget.messages - max(deeper, floor))

    def _current_tokens(self, req: WireRequest, counter: MemoCounter) -> int:
        """What a deep cut keeps whatever else goes: the leading instructions, the task and
        its newest step, with the reply priming."""
        messages, view = req.view.messages, req.view
        guard = protected(messages, req.policy.engine.rules, view.atomic_current, view.continuing)
        return counter.priming + sum(counter.message(messages[i]) for i in guard.indices())

    async def _prepare(
        self, req: WireRequest, budget: Budget, tokens: int, counter: MemoCounter
    ) -> None:
        """Past the soft limit: start the next summary in the background, cut for the deep cut
        it will serve (so that cut finds it ready). The deep cut's budget is taken now, from
        the conversation's last prompt before this one replaces it; the rest runs off the
        request's path (``soon``): deciding whether to prepare reads the store and prices the
        conversation, half a millisecond of an agent-sized request that forwards the same
        bytes either way."""
        assert self.compactor is not None
        last = await self._last_prompt(req) if self._sticky_key(req) else None
        deeper = self._deeper(req, budget, tokens, last, counter) or budget
        ctx = self._context(req, budget, counter)
        work = self.compactor.precompact(req.view.messages, budget.messages, ctx, deeper.messages)
        self.compactor.soon(work)

    async def _cut(
        self,
        req: WireRequest,
        budget: Budget,
        full: Budget,
        before: int,
        counter: MemoCounter,
        last: Fingerprint | None,
        sticky: str | None,
        dry_run: bool,
    ) -> Plan:
        """Summary checkpoint, then the engine's fit, to ``budget`` (``full`` is the request's
        own budget: what is reported, and what the output limit is settled against)."""
        original = req.view.messages
        messages, checkpoint, actions, pending = original, None, [], 0
        step = on_request(before, budget.messages, req.policy.config, req.session_memory)
        if step == "compact" and self.compactor is not None:
            ctx = self._context(req, budget, counter)
            deep = budget.messages if budget is not full else None
            compacted = await self.compactor.compact(
                original, full.messages, ctx, req.session_memory, dry_run, deep
            )
            if compacted is not None:
                messages, actions = compacted.messages, ["summarize"]
                what = compacted.checkpoint_id or compacted.detail or ""
                checkpoint = f"{compacted.event} {what}".strip()
                pending = compacted.pending_tokens
        # A dry run leaves room for the summary its placeholder stands for.
        fit_budget = replace(budget, margin=budget.margin + pending) if pending else budget
        share = 0.0 if budget is not full else None  # a deep cut needs no grid on top
        try:
            # The summary is kept whatever else goes: it stands for everything before it.
            sent = {id(m) for m in original}
            summary = frozenset(id(m) for m in messages if id(m) not in sent)
            tokens = before if messages is original else None  # counted already
            result = await self._fit(
                messages, fit_budget, req, counter, last, share, summary, tokens
            )
        except ContextTooLarge as exc:
            exc.before, exc.budget = before, full.messages
            exc.counted = "exact" if req.spec.pricing.exact else "estimate"
            raise
        result.tokens_after += pending
        actions += [a for a in result.actions if a not in actions]
        if sticky is not None and self.cuts is not None and actions and not req.continuation:
            cut = record(original, result.messages, actions, full.messages, message_digest)
            self.cuts.remember(sticky, replace(cut, checkpoint=checkpoint))
        return self._written(req, full, before, result, actions, checkpoint, dry_run)

    def _written(
        self,
        req: WireRequest,
        budget: Budget,
        before: int,
        result: Fit,
        actions: list[str],
        checkpoint: str | None,
        dry_run: bool = False,
    ) -> Plan:
        """The plan that forwards ``result``: the original bytes when nothing changed."""
        counted = "exact" if req.spec.pricing.exact else "estimate"
        output = settled(req, budget, result.tokens_after)
        payload = req.payload
        if output is not None:
            payload = output[0]
            actions.append(output[1])
        if not actions:
            return Plan(req.body, budget, before, result.tokens_after, [], counted, result)
        if len(actions) == 1 and output is not None:  # only the output limit changed
            return Plan(
                orjson.dumps(payload), budget, before, result.tokens_after, actions, counted, result
            )
        written = req.fmt.write(payload, req.view, result.messages)
        offered = self._recalling(req, result.messages, written, dry_run)
        trimmed = orjson.dumps(offered or written)
        plan = Plan(
            trimmed, budget, before, result.tokens_after, actions, counted, result, checkpoint
        )
        plan.recall = offered is not None
        return plan

    def _recalling(
        self, req: WireRequest, kept: list[Any], written: dict[str, Any], dry_run: bool
    ) -> dict[str, Any] | None:
        """Under a policy with ``recall``, the originals of the outputs ``kept`` names handles
        for are kept, and the payload to forward offers the recall tool (None: not offered)."""
        if not req.policy.config.recall:
            return None
        found = originals(req.view.messages, kept)
        if not found:
            return None
        if self.recalls is not None and not dry_run:
            self.recalls.keep(key_of(req), found)
        return offer(req.fmt, written) if req.offer_recall else None

    def _recent_key(self, req: WireRequest) -> tuple[str, str, str, float, float]:
        """Whose last counts a request may reuse (proxy/request/reused_counts.py): its
        conversation's, in its format, for its model as calibrated."""
        conversation = key_of(req)
        return conversation, req.fmt.name, req.spec.name, req.hidden_weight, req.message_weight

    def _sticky_key(self, req: WireRequest) -> str | None:
        """The conversation whose last cut this request replays, when the policy cuts
        cache-friendly (strategies/sticky.py)."""
        if self.cuts is None or req.policy.engine.cache_cut_share <= 0:
            return None
        key = key_of(req)
        if req.session_memory:  # the client's own summary: a new one is a new cut
            memory = hashlib.blake2b(req.session_memory.encode(), digest_size=8).hexdigest()
            key = f"{key}:{memory}"
        return key

    async def _replay(
        self, req: WireRequest, key: str, budget: Budget, before: int, counter: MemoCounter
    ) -> Plan | None:
        """The conversation's last cut replayed with the new messages appended, when that fits
        (and the budget has not grown by a cache grid step since the cut: a calibrated window
        moves a little from request to request); None: cut afresh. Past the soft limit,
        the next summary is prepared in the background, for when the replay stops fitting."""
        assert self.cuts is not None
        recipe = await self.cuts.recall(key)
        grid = req.policy.engine.cache_cut_share
        if recipe is None or budget.messages > recipe.budget * (1 + grid):
            return None  # a budget a grid step larger keeps more: worth a new cut
        messages = replay(recipe, req.view.messages, message_digest)
        if messages is None:
            return None
        if req.policy.engine.repair_tool_calls:
            messages = repair_tool_calls(messages)[0]
        tokens = await off_loop(req.fresh, count_prompt, counter, messages)
        if tokens > budget.messages:
            return None
        config = req.policy.config
        past_soft = tokens > soft_limit(budget.messages, config)
        if past_soft and self.compactor is not None and summarizes(config, req.session_memory):
            await self._prepare(req, budget, before, counter)
        actions = [*recipe.actions, "sticky"]
        checkpoint = recipe.checkpoint
        reused = checkpoint.replace("created", "reused", 1) if checkpoint else None
        result = Fit(messages, before, tokens, budget.messages, list(actions))
        return self._written(req, budget, before, result, actions, reused)

    def _stateful(self, req: WireRequest) -> Plan:
        """The server holds history the proxy cannot see, so it cannot count or trim it: the
        policy passes the request through, or asks the server to truncate (Responses'
        ``truncation: "auto"``). Either way the report says ``stateful``."""
        if req.policy.config.stateful != "truncation_auto" or "truncation" in req.payload:
            return Plan(req.body, None, actions=["stateful"], counted="none")
        body = orjson.dumps({**req.payload, "truncation": "auto"})
        return Plan(body, None, actions=["stateful", "truncation-auto"], counted="none")

    def budget(self, req: WireRequest, window: int) -> Budget:
        return budget_for(req, window, self.settings.trimming)

    async def _last_prompt(self, req: WireRequest) -> Fingerprint | None:
        """The conversation's last forwarded prompt, for policies that cut cache-friendly."""
        if self.prefixes is None or req.policy.engine.cache_cut_share <= 0:
            return None
        key = key_of(req)
        return await self.prefixes.last(key)

    async def _fit(
        self,
        messages: list[Any],
        budget: Budget,
        req: WireRequest,
        counter: MemoCounter,
        last: Fingerprint | None = None,
        share: float | None = None,
        kept: frozenset[int] = frozenset(),
        tokens: int | None = None,
    ) -> Fit:
        """The engine's fit, in a worker thread when the body has much that is new
        (``off_loop``); ``tokens``: the messages' count, when made already by ``counter``."""
        prices = req.spec.prices
        if share is None and prices:
            share = cut_share(prices, growth(messages, counter), budget.messages)
        try:
            return await off_loop(
                req.fresh,
                fit,
                messages,
                budget.messages,
                counter,
                req.policy.engine,
                atomic_current=req.view.atomic_current,
                pinned=req.pinned | kept,
                continuing=req.view.continuing,
                cut_share=share,
                keeps_prefix=None if last is None else partial(extends, last),
                tokens=tokens,
            )
        except DoesNotFit as exc:
            taken = budget.messages - exc.limit
            error = ContextTooLarge(
                f"keeping the {BLOCK_WORDS.get(exc.block_id, exc.block_id + ' messages')} whole "
                f"takes {exc.tokens} tokens, but only {exc.limit} of the {budget.messages} tokens "
                f"for messages are left for it ({taken} go to the reply priming and to messages "
                f"kept before; {budget.explain()}); shorten it or use a model with a larger "
                f"window{HINTS.get(exc.block_id, '')}",
                param=req.fmt.messages_param,
                tokens=exc.tokens + taken + budget.window - budget.messages,
                limit=budget.window,
            )
            error.kept = exc.tokens + taken  # what the part that must be kept takes
            raise error from None

    def _soft_limit(self, req: WireRequest, budget: Budget) -> int:
        """Past this count a request is counted (not sent on its byte bound): a summary may be
        due (proxy/summaries/decision.py)."""
        config = req.policy.config
        if self.compactor is None or not summarizes(config, req.session_memory):
            return budget.messages
        return soft_limit(budget.messages, config)

    def summary_context(self, req: WireRequest, budget: Budget) -> Context:
        """What the summarizer needs of ``req`` for a summary of its own (a client's
        compaction answered by the proxy: proxy/request/compaction.py)."""
        return self._context(req, budget, MemoCounter(req.counter()))

    def _context(self, req: WireRequest, budget: Budget, counter: MemoCounter) -> Context:
        """What the compactor needs of the request; ``counter`` is the request's own, which
        has priced its messages already."""
        window = req.policy.config.summarizer.context_window or budget.window
        return Context(
            req.team,
            counter,
            req.policy.config,
            target_for(self.settings, req),
            budget.reserve,
            window,
            self.settings.teams[req.team].summarizer_calls_per_hour
            if req.team in self.settings.teams
            else None,
            req.scope,
            req.pinned
            | pinned_ids(req.view.messages, req.policy.engine.pins)
            | standing_ids(
                req.view.messages,
                counter,
                budget.messages,
                req.policy.engine.standing_share,
                req.view.continuing,
            ),
            req.view.atomic_current,
            req.view.continuing,
        )


# Sticky cuts: a fresh cut leaves room for this many requests' growth (at most DEEPEST of the
# budget), so that about nine in ten trimmed requests replay it and keep their cached prefix.
# A deeper cut that summarizes summarizes more: past 55% the summarizer's tokens grew faster
# than the cuts thinned out (bench/families.py). A running task's cuts only drop old steps.
STICKY_REQUESTS = 10
DEEPEST = 0.55
DEEPEST_STEPS = 0.6

# What a user calls the blocks that must be kept whole, for the errors they read.
BLOCK_WORDS = {
    "system": "system prompt",
    "leading": "leading system/developer messages (the application's instructions)",
    "current": "current turn (the newest user message and what follows it)",
    "running-turn": "running task (its task message and newest step)",
    "pinned": "pinned messages",
    "newest": (
        "current turn's task and newest step (the user message that opened it, and the last "
        "assistant message with its calls and their results)"
    ),
}
HINTS = {
    "leading": (
        ". Leading system/developer messages after the first are strict by default; if they "
        "are retrieved documents, a policy with the rule {id: documents, match: {position: "
        "leading}, tier: rag, strategy: relevance_drop} (the example config's rag policy) drops "
        "the least relevant instead"
    ),
}


# Counting and fitting go to a worker thread only for a body with this many bytes or more that
# its conversation's last request did not send (``WireRequest.fresh``): tokenizing them is work
# that releases the interpreter (tiktoken drops the GIL), so the event loop serves other
# requests meanwhile. The rest of the work (cache hits, the engine's passes) is Python, which
# holds the interpreter wherever it runs, and in a worker it ran at half speed here (a warm
# 128k-token trimmed request: count 0.8 ms inline, 1.3 ms in a worker; fit 1.4 ms and 2.9 ms;
# bench/speed_before.md); the thread's round trip is paid on top. An agent's request, whose
# history was all sent before, is counted and fitted on the event loop whatever its size.
INLINE_BYTES = 64 * 1024


async def off_loop(fresh: int, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, in a worker thread when ``fresh`` (bytes of text that may need
    tokenizing) is ``INLINE_BYTES`` or more."""
    if fresh < INLINE_BYTES:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


def within(req: WireRequest, budget: Budget, plan: Plan) -> Plan:
    """``plan`` (fitted to the estimate's loose window) with a large reply limit the client
    asked for lowered to what ``budget``'s own window leaves beside the prompt, by the proxy's
    count: a limit set by the loose window would be refused whenever the count was right (a
    Claude Code session: every request, then a retry). A small limit, or one the count leaves
    no room for, stays as the plan has it: the upstream's figures correct it if need be."""
    asked = req.fmt.requested_output(req.payload)
    if asked is None or plan.tokens_after is None or output_floor(req, asked) is None:
        return plan
    room = math.floor(
        (budget.window - budget.tools - budget.margin - plan.tokens_after) * req.units
    )
    payload = orjson.loads(plan.body)
    current = req.fmt.requested_output(payload)
    if room < 1 or current is None or current <= room:
        return plan
    lowered = orjson.dumps(req.fmt.with_output(payload, room))
    actions = [a for a in plan.actions if not a.startswith("max-tokens-lowered")]
    return replace(plan, body=lowered, actions=[*actions, f"max-tokens-lowered {asked}->{room}"])


def broken(req: WireRequest, plan: Plan) -> str | None:
    """The promise of the post-condition ``plan`` breaks (proxy/request/postcondition.py)."""
    kept = plan.fit.messages if plan.fit is not None else None
    return violation(req, kept, plan.actions, plan.tokens_after, plan.budget)


def growth(messages: list[Any], counter: MemoCounter) -> int:
    """The conversation's growth per request, estimated as its newest turn's tokens."""
    last = last_user_index(messages)
    return sum(counter.message(m) for m in messages[last:]) if last >= 0 else 0
