"""A request fitted to a budget, always from the original messages (never from an already
degraded view):

    fitted       the conversation's last cut replayed (sticky_replay.py), else a deep cut
                 (deep_cuts.py), else a cut to the budget itself
    cut          the summary checkpoint (reused or created) when the policy summarizes, then
                 the engine's fit (strategies/engine.py) and the ledger of what it removed
                 (ledger.py), remembered for the next requests
    engine_fit   the engine's fit, off the loop for a body with much that is new; a refusal
                 that names what must be kept when even that cannot fit

Cache economy: under a policy that cuts cache-friendly, the engine is given the conversation's
last forwarded prompt (proxy/request/conversations.py) and prefers a cut on the cache grid to
passes that would rewrite it (strategies/engine.py: keeps_prefix). For a model with prices, a
cut goes deep enough for the cache-write premium to be paid back by the cheap reads of the
requests before the next cut (strategies/cost.py: cut_share).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from proxy.errors import ContextTooLarge
from proxy.request.conversations import Fingerprint, extends, message_digest
from proxy.request.planning.deep_cuts import deeper, last_prompt
from proxy.request.planning.ledger import (
    LedgerCut,
    Reserved,
    add_ledger,
    reserve,
    summary_front,
)
from proxy.request.planning.off_loop import off_loop, work_of
from proxy.request.planning.plan import Plan, plan_of_fit
from proxy.request.planning.planner_state import Attempt
from proxy.request.planning.sticky_replay import replay_last_cut
from proxy.request.planning.summary_context import summary_context
from proxy.request.sticky_cuts import sticky_key
from proxy.summaries.decision import on_request
from proxy.windows.advice import frame_note
from strategies.budget import Budget
from strategies.cost import cut_share
from strategies.engine import Fit, FitRequest, fit
from strategies.errors import DoesNotFit
from strategies.messages import last_user_index, leading_count
from strategies.step_cut import STEP_CUT
from strategies.sticky import record
from strategies.tokens import MemoCounter


@dataclass(frozen=True, slots=True, kw_only=True)
class CutTo:
    """Where a cut goes: ``budget``, a deep cut's target or the request's own (``full``: what is
    reported, and what the output limit is settled against); the conversation's last
    forwarded prompt (``last``), whose prefix the engine keeps when it can; the key the cut is
    remembered under for the next requests to replay (``sticky``; None: not remembered); and
    whether the newest step's outputs may be cut when it cannot fit whole (``cut_newest``: the
    last resort, which the caller asks for once its own allowances are spent)."""

    budget: Budget
    full: Budget
    last: Fingerprint | None = None
    sticky: str | None = None
    cut_newest: bool = False

    @property
    def deep(self) -> bool:
        """Whether the cut aims under the request's own budget (a deep cut)."""
        return self.budget is not self.full


async def fitted(attempt: Attempt, budget: Budget, cut_newest: bool = False) -> Plan:
    """Compact (checkpoint, then the engine's fit) from the original messages.
    ``cut_newest``: when the newest step cannot fit whole, its largest outputs are cut
    (strategies/step_cut.py) rather than the request refused: the last resort, which the
    caller asks for once its own allowances are spent."""
    planner, req, dry_run = attempt.planner, attempt.req, attempt.dry_run
    sticky = None if dry_run else sticky_key(planner.cuts, req)
    if sticky is not None:
        replayed = await replay_last_cut(attempt, sticky, budget)
        if replayed is not None:
            return replayed
    last = None if dry_run else await last_prompt(planner, req)
    deep = None if sticky is None else deeper(req, budget, attempt.before, last, attempt.counter)
    if deep is not None:
        # Cut deep enough that the next requests only append (they replay this cut); when
        # what must be kept does not fit that deep, the cut is made to the budget itself.
        try:
            return await cut(attempt, CutTo(budget=deep, full=budget, last=last, sticky=sticky))
        except ContextTooLarge as exc:
            # The deep target counts the protected messages alone; what the policy keeps
            # besides them (a system message mid-conversation: Claude Code's attachments)
            # made it too shallow for them, and the cut went to the budget itself: it dropped
            # a step or two, so the next request had to cut again (a broken prefix two
            # requests in three). Once more, at what the engine said it must keep.
            deepest = getattr(exc, "kept", None)
            if deepest is None or not deep.messages < deepest < budget.messages:
                deepest = None
        if deepest is not None:
            again = replace(budget, margin=budget.margin + budget.messages - deepest)
            try:
                return await cut(
                    attempt, CutTo(budget=again, full=budget, last=last, sticky=sticky)
                )
            except ContextTooLarge:
                pass
    to = CutTo(budget=budget, full=budget, last=last, sticky=sticky, cut_newest=cut_newest)
    return await cut(attempt, to)


async def cut(attempt: Attempt, to: CutTo) -> Plan:
    """Summary checkpoint, then the engine's fit, to ``to.budget``."""
    planner, req, counter, before = attempt.planner, attempt.req, attempt.counter, attempt.before
    budget, full = to.budget, to.full
    original = req.view.messages
    messages, checkpoint, actions, pending = original, None, [], 0
    config = req.policy.config
    step = on_request(before, budget.messages, config, req.session_memory, req.client_compaction)
    if step == "compact" and planner.compactor is not None:
        ctx = await off_loop(work_of(req), summary_context, planner.settings, req, budget, counter)
        deep = budget.messages if to.deep else None
        compacted = await planner.compactor.compact(
            original, full.messages, ctx, req.session_memory, attempt.dry_run, deep
        )
        if compacted is not None:
            messages, actions = compacted.messages, ["summarize"]
            what = compacted.checkpoint_id or compacted.detail or ""
            checkpoint = f"{compacted.event} {what}".strip()
            pending = compacted.pending_tokens
    # A dry run leaves room for the summary its placeholder stands for.
    fit_budget = replace(budget, margin=budget.margin + pending) if pending else budget
    try:
        # The summary is kept whatever else goes: it stands for everything before it.
        sent = {id(m) for m in original}
        summary = frozenset(id(m) for m in messages if id(m) not in sent)
        call = EngineCall(
            attempt=attempt,
            messages=messages,
            kept=summary,
            tokens=before if messages is original else None,  # counted already
            last=to.last,
            share=0.0 if to.deep else None,  # a deep cut needs no grid on top
        )
        # Room for the ledger of what the cut removes (quoted without a model: the floor
        # under the summary), unless what must be kept needs it.
        # A deep cut's target is for what it keeps verbatim: its ledger goes on top, within
        # the request's own budget (the ledger is the same bytes while the cut is replayed, so
        # it costs the growth room no more than the verbatim tail would).
        whole = fit_budget if not to.deep else replace(full, margin=full.margin + pending)
        ledger = LedgerCut(
            req=req, counter=counter, before=before, budget=fit_budget, full=full, whole=whole
        )
        reserved: Reserved | None = await off_loop(work_of(req), reserve, ledger, messages)
        room = reserved.tokens if reserved is not None else 0
        try:
            deeper_by = max(0, fit_budget.messages + room - whole.messages)
            result = await engine_fit(
                call, replace(fit_budget, margin=fit_budget.margin + deeper_by)
            )
        except ContextTooLarge:
            if not room and to.deep:
                raise  # a deep cut: the cut to the budget itself comes next
            reserved = None  # what must be kept needs it: the ledger gets what the fit leaves
            try:
                result = await engine_fit(call, fit_budget)
            except ContextTooLarge:
                if to.deep or not to.cut_newest:
                    raise
                # The last resort before a refusal: the newest step's largest outputs are
                # cut (strategies/step_cut.py), never before the ledger's room, a deep
                # target, a sticky replay or the caller's allowances have given way.
                result = await engine_fit(call, fit_budget, cut_newest=True)
        front = summary_front(messages, original) if summary else frozenset()
        result = await off_loop(work_of(req), add_ledger, ledger, result, reserved, front)
    except ContextTooLarge as exc:
        exc.before, exc.budget = before, full.messages
        exc.counted = "exact" if req.spec.pricing.exact else "estimate"
        raise
    result.tokens_after += pending
    actions += [a for a in result.actions if a not in actions]
    # A cut inside the newest step is made afresh for each request (the next one's newest
    # step is another), never replayed.
    replayable = not any(a.startswith(STEP_CUT) for a in actions)
    sticky = to.sticky
    if (
        sticky is not None
        and planner.cuts is not None
        and actions
        and replayable
        and not req.continuation
    ):
        cut_by = (original, result.messages, actions, full.messages, message_digest)
        recipe = await off_loop(work_of(req), record, *cut_by)
        planner.cuts.remember(sticky, replace(recipe, checkpoint=checkpoint), req.owner)
    return plan_of_fit(attempt, full, result, actions, checkpoint)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCall:
    """What a cut asks of the engine, whatever the budget it tries: the messages (a summary's
    view, or the original ones), the ids kept whatever goes (the summary's), their count when
    made already, the conversation's last forwarded prompt, and the cut share (None: the
    model's prices decide it; 0: a deep cut needs no grid on top)."""

    attempt: Attempt
    messages: list[Any]
    kept: frozenset[int] = frozenset()
    tokens: int | None = None
    last: Fingerprint | None = None
    share: float | None = None

    def request(self, budget: Budget, cut_newest: bool = False) -> FitRequest:
        """The engine's request for a fit to ``budget``."""
        req, counter, share = self.attempt.req, self.attempt.counter, self.share
        prices = req.spec.prices
        if share is None and prices:
            share = cut_share(prices, growth(self.messages, counter), budget.messages)
        last = self.last
        return FitRequest(
            messages=self.messages,
            budget=budget.messages,
            counter=counter,
            tokens=self.tokens,
            pinned=req.pinned | self.kept,
            atomic_current=req.view.atomic_current,
            continuing=req.view.continuing,
            policy=req.policy.engine,
            cut_share=share,
            cut_newest=cut_newest,
            keeps_prefix=None if last is None else partial(extends, last),
        )


async def engine_fit(call: EngineCall, budget: Budget, cut_newest: bool = False) -> Fit:
    """The engine's fit, in a worker thread when the body has much that is new
    (``off_loop``); ``cut_newest``: the newest step's outputs may be cut when it cannot fit
    whole. A refusal names what must be kept (``ContextTooLarge``)."""
    req, counter, messages = call.attempt.req, call.attempt.counter, call.messages
    try:
        return await off_loop(work_of(req), fit, call.request(budget, cut_newest))
    except DoesNotFit as exc:
        taken = budget.messages - exc.limit
        # The client's own frame (its instructions and tool definitions), which is never cut:
        # when it leaves no step's room, the window the client needs.
        lead = messages[: leading_count(messages)]
        frame = budget.tools + counter.priming + sum(counter.message(m) for m in lead)
        error = ContextTooLarge(
            f"keeping the {BLOCK_WORDS.get(exc.block_id, exc.block_id + ' messages')} whole "
            f"takes {exc.tokens} tokens, but only {exc.limit} of the {budget.messages} tokens "
            f"for messages are left for it ({taken} go to the reply priming and to messages "
            f"kept before; {budget.explain()}); shorten it or use a model with a larger "
            f"window{HINTS.get(exc.block_id, '')}{frame_note(frame, budget.window) or ''}",
            param=req.fmt.messages_param,
            tokens=exc.tokens + taken + budget.window - budget.messages,
            limit=budget.window,
        )
        error.kept = exc.tokens + taken  # what the part that must be kept takes
        raise error from None


def growth(messages: list[Any], counter: MemoCounter) -> int:
    """The conversation's growth per request, estimated as its newest turn's tokens."""
    last = last_user_index(messages)
    return sum(counter.message(m) for m in messages[last:]) if last >= 0 else 0


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
