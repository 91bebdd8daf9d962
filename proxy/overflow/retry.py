"""The overflow retry: send, and while the upstream says the prompt was too long, re-fit
smaller from the original transcript and send again.

The loop knows nothing of HTTP requests or the runtime: it is given the first plan and the
callables of ``Retrying`` (send a plan, re-fit for a budget, the budget rule for a window, learn
from an overflow), so every wire format shares it.

Every model gets the retry, listed or not: a request whose window was unknown went uncounted;
on its overflow it is counted, and fitted to what the overflow taught (the window it stated, or,
without figures, the bound it set: proxy/windows/bounds.py).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from proxy.config.settings import Trimming
from proxy.errors import ContextTooLarge, Invariant
from proxy.overflow.peek import peek
from proxy.request.budget import checked
from proxy.request.planning.off_loop import off_loop
from proxy.request.planning.plan import Plan
from proxy.upstreams.forwarding import Reply, decoded, is_event_stream
from proxy.upstreams.overflows import Overflow, is_context_overflow
from proxy.windows.learned import Lesson
from proxy.windows.sane import MAX_WINDOW, sane_window
from strategies.budget import Budget

log = logging.getLogger("contextwarden.overflow")

UNKNOWN = "unknown-window"
UNBOUNDED = 2**31  # the window a request whose window was unknown is counted against


def lesson_of(overflow: Overflow, ours: int) -> Lesson | None:
    """The upstream's own figures, when its error states its window (``ours``: the prompt as
    the proxy counted it, tool definitions included)."""
    if not overflow.limit:
        return None
    evidence = f"the upstream stated a window of {overflow.limit} tokens"
    if overflow.prompt:
        evidence += f" and counted {overflow.prompt} in a prompt the proxy counted at {ours}"
    return Lesson(overflow.limit, overflow.prompt, evidence)


@dataclass(kw_only=True, frozen=True, slots=True)
class Retrying:
    """What the loop may call: each one a single concern of the request path."""

    send: Callable[[Plan], Awaitable[Reply]]
    refit: Callable[[Budget], Awaitable[Plan]]  # from the original transcript, never a view
    budget_for: Callable[[int], Budget]  # the first attempt's budget rule, for a window
    # What an overflow that states its window taught (in its own units) about the plan sent;
    # the window now in force, in the proxy's count (None: still unknown).
    learn: Callable[[Lesson, Plan], Awaitable[int | None]]
    # An overflow without figures: the plan's size is a bound (proxy/windows/bounds.py); the
    # window to retry at and the size refused, both in the proxy's count, or None to shrink
    # by ``overflow_shrink``. The flag says the plan's window was unknown (it was sent whole).
    refused: Callable[[Plan, bool], Awaitable[tuple[int, int] | None]]
    recount: Callable[[], int]  # the exact count, when the plan only has a bound
    lowers_output: bool = False  # the output limit may be lowered (proxy/request/budget.py)
    # The plan with its output limit set to a number of the upstream's tokens; None when the
    # request asked for no limit (there is nothing to lower).
    with_output: Callable[[Plan, int], Plan | None] | None = None
    output_floor: int = 1  # what an output limit is lowered to at least, while more is left
    # Told how long each reply's first events took to arrive (the upstream's time, not the
    # proxy's: a stream is peeked before it is relayed).
    waited: Callable[[float], None] = lambda seconds: None
    # Told each attempt's verdict (the reply, and its overflow or None): its span ends there
    # (proxy/observe/tracing.py).
    judged: Callable[[Reply, Overflow | None], None] = lambda reply, overflow: None


async def send_with_overflow_retry(
    plan: Plan, do: Retrying, trimming: Trimming
) -> tuple[Reply, Plan, int]:
    retries = 0
    while True:
        reply = await do.send(plan)
        overflow = await overflow_of(reply, plan.body)
        overflow = sane(overflow) if overflow is not None else None
        do.waited(reply.peek_seconds)
        do.judged(reply, overflow)
        if not should_retry(overflow, plan, retries, trimming.max_overflow_retries):
            return reply, plan, retries
        if overflow is None:
            raise Invariant("a retry without an overflow")
        retry: Plan | None
        try:
            retry = await _retry_plan(plan, overflow, do, trimming)
        except ContextTooLarge as exc:
            retry = lowered(plan, overflow, do, 1)  # any room beats the error
            if retry is None:
                log.info("overflow not retried: %s; the upstream's error stands", exc.message)
                return reply, plan, retries
        await reply.aclose()
        retries += 1
        retry.actions = [*retry.actions, "overflow-retry"]
        plan = retry


def lowered(plan: Plan, overflow: Overflow, do: Retrying, floor: int) -> Plan | None:
    """``plan`` with its output limit lowered to what the upstream's figures leave beside the
    prompt it counted (``a + b > c``: ``c - a``), when that is at least ``floor``; None when
    the figures say the input alone is over, state no reply limit, or leave less."""
    limit, prompt = overflow.limit, overflow.prompt
    if do.with_output is None or not (limit and prompt and overflow.completion):
        return None
    room = limit - prompt
    if room < max(1, floor) or room >= overflow.completion:
        return None
    retry = do.with_output(plan, room)
    if retry is not None:
        retry.actions = [*retry.actions, f"max-tokens-lowered {overflow.completion}->{room}"]
    return retry


def sane(overflow: Overflow) -> Overflow:
    """``overflow`` with its figures held to what a window and a count can be
    (proxy/windows/sane.py): a limit outside it is no limit (the overflow states no figures),
    a count outside it no count."""

    def count(n: int | None) -> int | None:
        return n if n is not None and 0 < n <= MAX_WINDOW else None

    limit = sane_window(overflow.limit) if overflow.limit is not None else None
    return Overflow(limit, count(overflow.prompt), count(overflow.completion))


async def _retry_plan(plan: Plan, overflow: Overflow, do: Retrying, trimming: Trimming) -> Plan:
    """The next plan after ``overflow``: what it taught is learned, then the original is fitted
    to the smaller window; ContextTooLarge when nothing smaller can hold what must be kept."""
    unknown = plan.budget is None
    if unknown:  # sent whole and uncounted: counted now, against no window
        plan.budget, plan.tokens_after = do.budget_for(UNBOUNDED), do.recount()
    elif plan.counted == "bound":  # the shrink must start from the real count, not a bound
        plan.tokens_after = do.recount()
    if plan.budget is None or plan.tokens_after is None:
        raise Invariant("a retried plan is counted against a budget")
    lesson = lesson_of(overflow, plan.tokens_after + plan.budget.tools)
    known = await do.learn(lesson, plan) if lesson is not None else None
    # The upstream's own figures first: a prompt that fit beside a smaller reply limit is
    # sent again as it was, with the limit those figures leave.
    retry = lowered(plan, overflow, do, do.output_floor)
    if retry is not None:
        return retry
    if overflow.limit:
        budget, _ = budget_after_overflow(
            plan, overflow, do.budget_for, trimming, do.lowers_output, known
        )
        return await do.refit(budget)
    bound = await do.refused(plan, unknown)
    if bound is None:
        return await do.refit(_shrunk(plan.budget, plan.tokens_after, trimming.overflow_shrink))
    return await _refit_within(plan, *bound, do)


async def _refit_within(plan: Plan, window: int, sent: int, do: Retrying) -> Plan:
    """The original fitted to ``window``; when what must be kept does not fit that small but
    fits below what was refused (``sent``), fitted to the least window that holds it."""
    if plan.budget is None:
        raise Invariant("a retried plan is counted against a budget")
    fixed = plan.budget.window - plan.budget.messages  # a reply reserve, tools and the margin
    for _ in range(3):  # the window asked, the least the budget allows, the least the fit does
        try:
            return await do.refit(do.budget_for(window))
        except ContextTooLarge as exc:
            least = exc.tokens if exc.tokens is not None else fixed + 1
            if not window < least < sent:
                raise
            window = least
    raise ContextTooLarge("nothing below the refused size holds what must be kept")


def should_retry(overflow: Overflow | None, plan: Plan, retries: int, limit: int) -> bool:
    """Whether to retry after this answer; the reason is logged on every exit."""
    if overflow is None:
        reason, retry = "not a context overflow", False
    elif plan.budget is None and UNKNOWN not in plan.actions:
        reason, retry = "overflow, but trimming is off or the request is stateful", False
    elif retries >= limit:
        reason, retry = f"overflow, but the {limit} retries are used up", False
    else:
        reason, retry = f"overflow (limit {overflow.limit}, counted {overflow.prompt})", True
    level = logging.DEBUG if overflow is None else logging.INFO
    log.log(level, "attempt %d: %s: %s", retries + 1, reason, "retrying" if retry else "done")
    return retry


def budget_after_overflow(
    plan: Plan,
    overflow: Overflow,
    budget_for: Callable[[int], Budget],
    trimming: Trimming,
    lowers_output: bool = False,
    known: int | None = None,
) -> tuple[Budget, int | None]:
    """The budget for a retry after an upstream overflow, and the window learned (our tokens).

    When the upstream says its limit and its count, the ratio between its count and ours tells
    how its tokenizer compares to our counter, and the learned window is the limit rescaled by
    it (no larger than the first attempt's). The whole budget is then recomputed for that
    window by the first attempt's own rule: a reply reserve sized for a 64k window must not eat
    a 2k one. Without numbers the messages'
    share shrinks by ``overflow_shrink``. Either way the budget for the messages ends below what
    was just sent, so each retry progresses; ContextTooLarge when no room is left.

    When the upstream says the prompt fit and only the output limit did not (``a + b > c``) and
    the request's limit may be lowered, the budget for the learned window is all it takes: the
    refit keeps the messages and lowers the limit to what that window leaves.

    A limit stated without the upstream's count (``known``: the window it set, now in force,
    in the proxy's count) is fitted to when that is smaller than what was sent.
    """
    if plan.budget is None or plan.tokens_after is None:
        raise Invariant("a retried plan is counted against a budget")
    old, sent = plan.budget, plan.tokens_after
    if overflow.limit and overflow.prompt:
        # The upstream's tokens per proxy token on this very prompt: under 1 too (an estimate
        # running high), since the window in the proxy's units is then larger, never past
        # the one the first attempt used. Not when only the reply limit is to be lowered: the
        # limit is in the upstream's units, so the window is taken in them too, untouched.
        scale = overflow.prompt / max(1, sent + old.tools)
        if lowers_output and overflow.completion:
            scale = max(1.0, scale)
        learned = math.floor(overflow.limit / scale)
        fresh = budget_for(min(learned, old.window))
        if lowers_output and overflow.completion and fresh.messages >= sent:
            return fresh, learned
        if overflow.completion and overflow.completion > fresh.reserve:
            fresh = replace(fresh, reserve=overflow.completion)
        slack = fresh.messages - math.floor(fresh.messages * 0.98)  # our count may be a bit low
        if fresh.messages - slack < sent:
            return checked(replace(fresh, margin=fresh.margin + slack)), learned
        return _shrunk(old, sent, trimming.overflow_shrink), learned
    if known is not None and known < old.window:
        fresh = budget_for(known)
        if fresh.messages < sent:
            return fresh, known
    return _shrunk(old, sent, trimming.overflow_shrink), None


def _shrunk(budget: Budget, sent: int, shrink: float) -> Budget:
    messages = math.floor(sent * (1 - shrink))
    return checked(replace(budget, window=messages + budget.reserve + budget.tools + budget.margin))


async def overflow_of(reply: Reply, sent: bytes | None = None) -> Overflow | None:
    """Whether the reply is a context overflow; a 200 stream is peeked up to its first decisive
    event (see proxy/overflow/peek.py). ``sent`` is the body forwarded: wording the upstream
    only echoed from it is not its verdict."""
    if reply.overflow is not None:
        return reply.overflow
    if reply.body is not None:
        if reply.status < 400:
            return None
        # Reading the message's own text may parse the request sent: off the loop when large.
        return await off_loop(
            len(sent or b""),
            is_context_overflow,
            reply.status,
            decoded(reply.body, reply.headers),
            sent,
        )
    if reply.stream is None or not _is_plain_event_stream(reply.headers):
        return None
    started = time.perf_counter()
    seen, reply.stream = await peek(reply.stream)
    reply.peeked, reply.peek_seconds = seen, time.perf_counter() - started
    if b'"error"' in seen or b"response.failed" in seen:
        return await off_loop(len(sent or b""), is_context_overflow, 200, seen, sent)
    return None


def _is_plain_event_stream(headers: list[tuple[str, str]]) -> bool:
    """An uncompressed event stream, whose first events can be read as text."""
    encoded = any(k.lower() == "content-encoding" for k, _ in headers)
    return is_event_stream(headers) and not encoded
