"""Deep cuts: a fresh cut of a growing conversation goes deeper than its budget, leaving room
for the conversation to grow in while its next requests replay the cut (sticky_replay.py) and
keep their cached prefix; past the soft limit, the next summary is prepared in the background,
cut for the deep cut it will serve.

    deeper        the budget a fresh cut aims at (None: the plain cut, to the budget)
    prepare       the next summary started off the request's path, for that deeper budget
    last_prompt   the conversation's last forwarded prompt, which the growth is measured on
"""

from __future__ import annotations

from dataclasses import replace

from proxy.errors import Invariant
from proxy.request.conversations import Fingerprint, key_of
from proxy.request.planning.off_loop import off_loop, work_of
from proxy.request.planning.planner_state import PlannerState
from proxy.request.planning.summary_context import summary_context
from proxy.request.sticky_cuts import sticky_key
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.protected import protected
from strategies.tokens import MemoCounter

# Sticky cuts: a fresh cut leaves room for this many requests' growth (at most DEEPEST of the
# budget), so that about nine in ten trimmed requests replay it and keep their cached prefix.
# A deeper cut that summarizes summarizes more: past 55% the summarizer's tokens grew faster
# than the cuts thinned out (bench/families.py). A running task's cuts only drop old steps.
STICKY_REQUESTS = 10
DEEPEST = 0.55
DEEPEST_STEPS = 0.6


def deeper(
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
    deep = budget.messages - int(budget.messages * share)
    floor = current_tokens(req, counter)
    if floor >= budget.messages:
        return None
    return replace(budget, margin=budget.margin + budget.messages - max(deep, floor))


def current_tokens(req: WireRequest, counter: MemoCounter) -> int:
    """What a deep cut keeps whatever else goes: the leading instructions, the task and
    its newest step, with the reply priming."""
    messages, view = req.view.messages, req.view
    guard = protected(messages, req.policy.engine.rules, view.atomic_current, view.continuing)
    return counter.priming + sum(counter.message(messages[i]) for i in guard.indices())


async def last_prompt(planner: PlannerState, req: WireRequest) -> Fingerprint | None:
    """The conversation's last forwarded prompt, for policies that cut cache-friendly."""
    if planner.prefixes is None or req.policy.engine.cache_cut_share <= 0:
        return None
    key = key_of(req)
    return await planner.prefixes.last(key)


async def prepare(
    planner: PlannerState, req: WireRequest, budget: Budget, tokens: int, counter: MemoCounter
) -> None:
    """Past the soft limit: start the next summary in the background, cut for the deep cut
    it will serve (so that cut finds it ready). The deep cut's budget is taken now, from
    the conversation's last prompt before this one replaces it; the rest runs off the
    request's path (``soon``): deciding whether to prepare reads the store and prices the
    conversation, half a millisecond of an agent-sized request that forwards the same
    bytes either way."""
    if planner.compactor is None:
        raise Invariant("a deep cut planned without a compactor")
    last = await last_prompt(planner, req) if sticky_key(planner.cuts, req) else None
    target = deeper(req, budget, tokens, last, counter) or budget
    ctx = await off_loop(work_of(req), summary_context, planner.settings, req, budget, counter)
    work = planner.compactor.precompact(req.view.messages, budget.messages, ctx, target.messages)
    planner.compactor.soon(work)
