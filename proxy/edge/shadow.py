"""Shadow mode (``mode: shadow``, a team's or else its policy's): adopting the proxy without
changing a request.

The request goes upstream as the proxy forwards it with trimming off: the client's bytes, less
only what the proxy always takes out (its own ``contextwarden`` controls and markers; a
Messages body's context management for an upstream configured not to take it). Its headers are
the ones every request gets (proxy/headers.py: upstream_headers), and the answer comes back
byte for byte, with ``x-contextwarden-actions: shadow``. An upstream overflow is passed on as
it came (no retry) and counted.

On the request's path, only what deciding whether, where and how to forward it needs: the
intake's first half (proxy/edge/intake.py ``read_request``: the body validated by its format,
controls, the model, its route and the team's permissions; in keys mode, the ownership of the
objects it names). So whatever enforce mode refuses as bad input or not allowed (400, 403,
413), shadow mode refuses alike, before anything is forwarded; a request enforce mode refuses
only for not fitting its window is forwarded, and recorded as ``would-refuse``. The rest of
the intake (``made_request``: the format's view, the window, the conversation and its pins),
the access-log line and the metrics of the forwarded request, and the plan, come after.

After the answer is made, off the request's path, the plan the proxy would have made is made
(the planner's own first plan, to the same budget) and recorded apart from what it did
(proxy/observe/shadow.py): whether it would trim, summarize or refuse, the tokens and dollars it
would save, and whether what it would forward keeps its conversation's previous planned prompt
as its cached prefix. The plan keeps what the enforced path keeps between requests (its cut, to
replay; the prompt's fingerprint; the conversation seen), so a conversation's later plans are
made as they would be. It makes no summary unless the team's
``shadow_summarizer_calls_per_hour`` allows one (counted apart from its enforced quota); else a
summary is estimated as the preview estimates it (proxy/summaries/compactor.py). No recall
original is kept and no fallback model is tried: a request that cannot fit its own model is
recorded as ``would-refuse``.

A shadow plan that fails is logged and counted; the client's answer left before it began.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.edge.auth import Principal
from proxy.edge.intake import Intake
from proxy.errors import ContextTooLarge, ProxyError
from proxy.headers import cw_headers
from proxy.observe.outcome import Outcome
from proxy.observe.shadow import REFUSE
from proxy.overflow.retry import overflow_of
from proxy.request.compaction import compaction_trigger
from proxy.request.fitting import fitting_for
from proxy.request.kept_prefix import outcome_of, see_prefix
from proxy.request.planning.plan import Plan
from proxy.upstreams.forwarding import Reply, respond
from proxy.wire import WireRequest

if TYPE_CHECKING:
    from starlette.responses import Response

    from proxy.edge.background import Background
    from proxy.observe.metrics import Metrics
    from proxy.overflow.relearning import Planning
    from proxy.request.conversations import PrefixTracker
    from proxy.windows.models import Models

log = logging.getLogger("contextwarden.shadow")

SHADOW = "shadow"  # the action of a request forwarded as sent in shadow mode


@dataclass(frozen=True, slots=True, kw_only=True)
class Shadowing:
    """What shadow mode counts with and plans with after the answer: the metrics, the
    background its plans run in (proxy/edge/background.py), whether OpenTelemetry is on (the
    request's span then takes its outcome), the planner and trimming settings, the prefixes
    kept and the store's writes, settled after each plan (proxy/stores/writer.py)."""

    metrics: Metrics
    background: Background
    traced: bool
    planning: Planning
    prefixes: PrefixTracker
    settle: Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AsSent:
    """How the request path handles one shadow mode request (proxy/edge/exchange.py): ``send``
    sends it once, ``made`` makes the rest of its intake (``made_request``), ``started`` is
    when it arrived and ``upstream`` the seconds spent waiting for the upstream so far."""

    send: Callable[[Plan], Awaitable[Reply]]
    made: Callable[[], Awaitable[WireRequest]]
    started: float
    upstream: Callable[[], float]


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """A shadow request's answer, as its plan after it reads it: its team, its status, a
    refusal it carried whole (read for an overflow), and its outcome when still to count."""

    team: str
    status: int
    refused: Reply | None
    outcome: Outcome | None


def shadowed(models: Models, intake: Intake, who: Principal) -> bool:
    """Whether the request ``intake`` read runs in shadow mode: its team's mode, else its
    policy's; never a compaction the proxy answers or serves itself."""
    if intake.compaction is not None or compaction_trigger(intake.fmt, intake.spec, intake.payload):
        return False
    return (who.config.mode or models.policy(intake.policy).config.mode) == SHADOW


async def forward(shadowing: Shadowing, intake: Intake, who: Principal, how: AsSent) -> Response:
    """The request ``intake`` read, sent upstream as it came, once; its answer relayed; then,
    off its path (``after``), counted as the request path counts a forwarded request, made
    (``how.made``: the rest of its intake, proxy/edge/intake.py ``made_request``) and
    planned."""
    send, started, upstream = how.send, how.started, how.upstream
    sent = Plan(body=intake.body, budget=None, actions=[SHADOW], counted="none")
    reply = await send(sent)
    response = respond(reply, cw_headers(sent, 0))
    stream = bool(intake.payload.get("stream"))
    outcome = Outcome(
        team=who.team,
        model=intake.spec.name,
        status=reply.status,
        tokens_before=None,
        tokens_after=None,
        actions=[SHADOW],
        retries=0,
        checkpoint=None,
        overhead=time.perf_counter() - started - upstream(),
        upstream=upstream(),
        stream=stream,
        policy=intake.policy,
        path=intake.fmt.path,
        format=intake.fmt.name,
    )
    # A refusal the answer carries whole is read for an overflow after, with the plan; a
    # stream is never peeked (that would hold its first bytes).
    refused = reply if reply.status >= 400 and reply.body is not None else None
    if shadowing.traced:  # the request's span takes its outcome before it ends
        shadowing.metrics.record(outcome)
    later = outcome if not shadowing.traced else None
    answered = Answered(team=who.team, status=reply.status, refused=refused, outcome=later)
    shadowing.background.start(after(shadowing, how.made, answered), len(intake.body))
    return response


async def after(
    shadowing: Shadowing, made: Callable[[], Awaitable[WireRequest]], answered: Answered
) -> None:
    """After the answer: the forwarded request counted (``answered.outcome``, unless it was on
    the request's path), then made (its view, window, conversation) and the plan it would have
    had recorded (never raises: a failure is logged and counted)."""
    team, metrics = answered.team, shadowing.metrics
    if answered.outcome is not None:
        metrics.record(answered.outcome)
    try:
        req = await made()
    except Exception:  # fault boundary: after the answer, a shadow's failure is only counted
        log.exception("team %s: a shadow plan failed (the request was answered)", team)
        metrics.shadow.failed(team)
        return
    await plan_after(shadowing, req, answered.status, answered.refused)


async def plan_after(
    shadowing: Shadowing, req: WireRequest, status: int, refused: Reply | None
) -> None:
    """The plan ``req`` would have had, recorded (never raises: a failure is logged and
    counted)."""
    try:
        overflowed = refused is not None and await overflow_of(refused, req.body) is not None
        req.shadow = True
        conversation = False
        try:
            planning = shadowing.planning
            fitting = fitting_for(planning.planner, planning.trimming, req)
            conversation = fitting.conversation
            plan = await fitting.first()
        except ProxyError as exc:  # the enforced path would refuse it (or fall back)
            before = exc.before if isinstance(exc, ContextTooLarge) else None
            plan = Plan(
                body=req.body,
                budget=None,
                tokens_before=before,
                tokens_after=None,
                actions=[REFUSE],
                counted="none",
            )
        seen = await see_prefix(shadowing.prefixes, req, plan) if conversation else None
        await shadowing.settle()
        outcome = outcome_of(req, plan, seen, status)
        shadowing.metrics.record_shadow(outcome, overflowed)
    except Exception:  # fault boundary: after the answer, a shadow's failure is only counted
        log.exception("team %s: a shadow plan failed (the request was answered)", req.team)
        shadowing.metrics.shadow.failed(req.team)
