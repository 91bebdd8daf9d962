"""The allowances tried before a refusal, when what must be kept does not fit the budget:

    roomy        a reply reserve the client did not ask for (then the safety margin), or a
                 limit it asked for that the policy may lower, shrinks to what the window
                 leaves by the proxy's own count
    uncertain    the count's known error given to the window (never past a team's cap):
                 for a model the proxy only estimates, the estimate's ratio; until the
                 upstream's answers have calibrated the count, what it charges that the
                 upstream may not count (a Responses request's item envelopes, ``uncounted``,
                 tried after ``roomy`` for an exact count). The request goes (``uncertain-
                 forwarded``) and the upstream decides, a large asked reply limit lowered to
                 what the window itself leaves (``within``): its overflow's figures, if it
                 refuses, are what the retry fits to

    step cut     the newest step's largest outputs cut to a head, a tail and their error
                 lines (strategies/step_cut.py), at the budget itself: the last resort

A request is refused only when even what must be kept, the newest step's outputs cut, cannot
fit by the most favourable count.
"""

from __future__ import annotations

import math
from dataclasses import replace

import orjson

from proxy.errors import ContextTooLarge
from proxy.formats.responses_items import envelope_text
from proxy.request.budget import output_floor
from proxy.request.planning.fit_to_budget import fitted
from proxy.request.planning.plan import Plan
from proxy.request.planning.planner_state import Attempt
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.step_cut import ERRORS_SHORT

# The share of a reply reserve the newest step's error lines may take, when a cut would
# otherwise give them up.
ERROR_LINES_SHARE = 0.5


async def fitted_or_uncertain(attempt: Attempt, budget: Budget) -> Plan:
    """The fitted plan. A request is refused only when even what must be kept cannot fit
    the window by the most favourable count, beside the output limit the client asked
    for. A reply reserve the client did not ask for, or a limit it asked for that the
    policy may lower, shrinks to what the window leaves by the proxy's own count
    (``roomy``). For a model the proxy only estimates, the estimate's known error (it
    counts up to ``estimate_ratio`` times what the model does) is given to it first: the
    request goes, fitted to the window that error allows, and the upstream decides (its
    overflow error states its own figures, and the retry fits to those: never worse than
    no proxy, which would have forwarded it whole); a large reply limit it asked for is
    lowered to what the window itself leaves by the proxy's count (``within``). The one
    exception: a large limit the policy lowers, once the upstream has calibrated the count,
    gives way first (``roomy`` at the window itself) and the allowance comes only when
    that cannot hold what must be kept: a prompt fitted to the loose window leaves the
    reply nothing whenever the count is right (a Claude Code session: a refusal and a
    retry per request, each retry's reply limited to a few hundred tokens). A team's
    ``max_context_tokens`` is a hard cap: no allowance is given past it."""
    req, tokens = attempt.req, attempt.before
    ratio = attempt.planner.settings.trimming.estimate_ratio
    try:
        return await fitted(attempt, budget)
    except ContextTooLarge as certain:
        # An exact count is over the upstream's by its envelopes alone: the reply reserve
        # gives way first, then that gap, before the newest step's outputs are cut.
        exact = req.spec.pricing.exact
        loose = None if exact else _loose(req, budget, tokens, ratio)
        asked = req.fmt.requested_output(req.payload)
        # A large reply limit the policy lowers gives way first, once the count is known.
        giving = req.calibrated and output_floor(req, asked) is not None
        if loose is not None and not giving:
            plan = await _uncertain(attempt, budget, loose)
            if plan is not None:
                return plan
        try:
            return await roomy(attempt, budget)
        except ContextTooLarge:
            pass
        if exact and (loose := _loose(req, budget, tokens, ratio)) is not None:
            plan = await _uncertain(attempt, budget, loose)
            if plan is not None:
                return plan
        try:  # the last resort: the newest step's largest outputs cut (strategies/step_cut.py)
            return await roomy(attempt, budget, cut_newest=True)
        except ContextTooLarge:
            pass
        if loose is not None and giving and not exact:
            plan = await _uncertain(attempt, budget, loose)
            if plan is not None:
                return plan
        raise certain from None


def _loose(req: WireRequest, budget: Budget, tokens: int, estimate_ratio: float) -> Budget | None:
    """``budget`` with the count's known error given to its window (never past a team's
    cap): an estimate's ratio (``estimate_ratio``: the trimming settings'), and, until the
    upstream's answers have calibrated the count,
    what it charges that the upstream may not count (``uncounted``). None when that gives
    nothing."""
    loose_window = budget.window
    if not req.spec.pricing.exact:
        loose_window = math.floor(budget.window * estimate_ratio)
    if not req.calibrated and tokens > 0:
        # The envelopes' share of the request's count, of the window: what is kept of it
        # is over the upstream's count by about that share, not by all the request's.
        loose_window += math.floor(budget.window * min(1.0, uncounted(req) / tokens))
    if req.cap is not None:
        loose_window = min(loose_window, req.cap)
    if loose_window <= budget.window:
        return None
    return replace(budget, window=loose_window)


def uncounted(req: WireRequest) -> int:
    """The tokens the proxy's count charges for a Responses request's item envelopes (ids,
    types, statuses, Codex's per-item metadata: proxy/formats/responses_items.py), which the
    upstream bills as a few tokens of role markers an item: by this much the count may be
    over the upstream's before any answer has calibrated it. 0 for other formats."""
    if req.fmt.name != "responses":
        return 0
    text = envelope_text(req.view.messages)
    if not text:
        return 0
    counter = req.spec.pricing.counter
    return max(0, counter.message({"content": text}) - counter.message({}))


async def _uncertain(attempt: Attempt, budget: Budget, loose: Budget) -> Plan | None:
    """The plan fitted to the ``loose`` window, its large asked limit set by ``budget``'s
    own (``within``); None when even the loose window cannot hold what must be kept."""
    try:
        plan = await roomy(attempt, loose)
    except ContextTooLarge:
        return None
    plan = within(attempt.req, budget, plan, loose)
    plan.actions.append("uncertain-forwarded")
    return plan


async def roomy(attempt: Attempt, budget: Budget, cut_newest: bool = False) -> Plan:
    """The fitted plan; when what must be kept does not fit beside a reply reserve the
    client did not ask for, the reserve (then the safety margin) shrinks by what is
    missing, as often as that helps: the upstream takes a prompt that leaves less room for
    the reply, so the proxy does too. ``cut_newest``: the newest step's outputs are cut
    first, the reserve shrinking only for what the cut cannot give (the instructions alone
    may take more than the reserve leaves)."""
    while True:
        try:
            plan = await fitted(attempt, budget, cut_newest)
        except ContextTooLarge as exc:
            roomier = _roomier(attempt.req, budget, exc, split=cut_newest)
            if roomier is None:
                raise
            budget = roomier
            continue
        return await _with_error_lines(attempt, budget, plan)


async def _with_error_lines(attempt: Attempt, budget: Budget, plan: Plan) -> Plan:
    """``plan``, or, when its cut of the newest step gave up error lines (a failing test's
    line, a traceback) for want of a few tokens, the plan made with the reply reserve lowered
    by them, up to half of it (``ERROR_LINES_SHARE``): a reserve the client did not ask
    for, or a limit it asked for that the policy lowers (``lower_max_tokens``, which would
    halve it to keep the outputs' markers). What the model acts on next outranks a few tokens
    of a reply's room."""
    req, first = attempt.req, plan
    asked = req.fmt.requested_output(req.payload)
    if plan.fit is None or (asked is not None and not req.policy.config.lower_max_tokens):
        return plan
    most = math.floor(budget.reserve * ERROR_LINES_SHARE)
    given = 0
    for _ in range(2):  # a second time for what a recount at the cut's seams adds
        short = _short(plan)
        if not short:
            return plan
        given += short
        if given > most:
            return first
        lower = replace(budget, reserve=budget.reserve - given)
        try:
            plan = await fitted(attempt, lower, cut_newest=True)
        except ContextTooLarge:
            return first
    return plan if not _short(plan) else first


def _short(plan: Plan) -> int:
    """By how many tokens ``plan``'s cut of the newest step missed its error lines (0: none)."""
    steps = plan.fit.steps if plan.fit is not None else []
    return next((s.tokens_saved for s in steps if s.name == ERRORS_SHORT), 0)


def _roomier(
    req: WireRequest, budget: Budget, exc: ContextTooLarge, split: bool = False
) -> Budget | None:
    """``budget`` with its reserve (then its margin) shrunk by what ``exc`` says is missing
    for what must be kept; None when nothing is left to shrink, or the reply limit the
    client asked for is its own (``lower_max_tokens: false``). An asked limit is lowered
    (``settled`` writes it) to 1 at the least; a reserve the client did not ask for, to 0.
    ``split``: what must be kept was counted with the newest step's outputs cut to their
    least, so the reserve left is shared with them, half each, rather than all kept for the
    reply (which would leave the outputs their markers alone)."""
    asked = req.fmt.requested_output(req.payload)
    if exc.kept is None or (asked is not None and not req.policy.config.lower_max_tokens):
        return None
    least = 0 if asked is None else 1
    if asked is not None and not split:
        # While the newest step's outputs can still be cut, a reply limit the client asked for
        # keeps the policy's floor (``min_output_tokens``, or the limit when smaller): a step
        # over the window by a little is cut, not sent with a reply limit of a few tokens
        # (Claude Code with a 25k frame at 30.6k: max_tokens 32000 -> 1 on every request).
        least = min(asked, req.policy.config.min_output_tokens)
    missing = exc.kept - budget.messages
    if missing <= 0 or budget.reserve + budget.margin <= least:
        return None
    left = budget.reserve - missing
    reserve = max(least, left // 2 if split and left > 0 else left)
    margin = max(0, budget.margin - max(0, missing - (budget.reserve - reserve)))
    return replace(budget, reserve=reserve, margin=margin)


def within(req: WireRequest, budget: Budget, plan: Plan, loose: Budget | None = None) -> Plan:
    """``plan`` (fitted to the estimate's loose window) with a large reply limit the client
    asked for lowered to what ``budget``'s own window leaves beside the prompt, by the proxy's
    count: a limit set by the loose window would be refused whenever the count was right (a
    Claude Code session: every request, then a retry). A small limit, or one the count leaves
    no room for, stays as the plan has it: the upstream's figures correct it if need be.

    Before the upstream's answers have calibrated the count (its first requests), the limit
    is not lowered under the policy's floor while the ``loose`` window leaves room for it: the
    estimate may run up to its known error over, and a reply cut to a thousand tokens where
    the upstream had six thousand of room is worse than one refusal, whose figures the retry
    then fits exactly (proxy/overflow/retry.py: ``lowered``)."""
    asked = req.fmt.requested_output(req.payload)
    floor = output_floor(req, asked)
    if asked is None or plan.tokens_after is None or floor is None:
        return plan
    room = math.floor(
        (budget.window - budget.tools - budget.margin - plan.tokens_after) * req.units
    )
    if loose is not None and not req.calibrated and room < floor:
        most = math.floor(
            (loose.window - budget.tools - budget.margin - plan.tokens_after) * req.units
        )
        room = max(room, min(floor, most))
    payload = orjson.loads(plan.body)
    current = req.fmt.requested_output(payload)
    if room < 1 or current is None or current <= room:
        return plan
    lowered = orjson.dumps(req.fmt.with_output(payload, room))
    actions = [a for a in plan.actions if not a.startswith("max-tokens-lowered")]
    return replace(plan, body=lowered, actions=[*actions, f"max-tokens-lowered {asked}->{room}"])
