"""A learned window, tried again. What overflows taught about a model's window
(proxy/windows/learned.py) held every later request of the team to it, and a request the proxy
refused itself never reached the upstream to say otherwise: a wrong lesson (one request's
content the proxy could not count, say) or a provider that raised its window was never noticed.

So once a lesson has held requests back for ``trimming.learned_retry_seconds``, or for
``learned_retry_requests`` requests, the next request it holds back (one the proxy would refuse,
or trim, to fit it) is planned without it and let through (``learned-window-retried`` in the
actions). Taken whole, it heals the lesson (proxy/request/lessons.py); refused, the overflow
teaches it again, and the retry fits the request as before.

A refusal by the proxy that rests on a lesson says so: which window, when it was learned, when
it is tried again, and how to forget it (``contextwarden windows forget``, or the admin API).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from proxy.errors import ContextTooLarge
from proxy.overflow.fallbacks import Build, plan_with_fallbacks
from proxy.request.fitting import first_plan
from proxy.request.planning.plan import Plan
from proxy.wire import WireRequest

if TYPE_CHECKING:
    from proxy.config.settings import Trimming
    from proxy.request.planning.planner import Planner
    from proxy.windows.models import Models

log = logging.getLogger("contextwarden.overflow")

RETRIED = "learned-window-retried"


@dataclass(frozen=True, slots=True, kw_only=True)
class Planning:
    """What the first plan is made with: the planner, the models' windows (a lesson's, and
    the one without it), the trimming settings (when a lesson is tried again)."""

    planner: Planner
    models: Models
    trimming: Trimming


async def planned(
    with_: Planning, req: WireRequest, body: bytes, build: Build
) -> tuple[WireRequest, Plan, bool]:
    """The request to send and its plan (its own model's or a fallback's), and whether it is
    let through past a lesson."""
    plan_first = partial(first_plan, with_.planner, with_.trimming)
    try:
        chosen, plan = await plan_with_fallbacks(req, body, build, plan_first)
    except ContextTooLarge as exc:
        trial = await _past_lesson(with_, req)
        if trial is not None:
            return req, trial, True
        said = learned_note(with_.models, with_.trimming, req)
        if said:
            exc.message = f"{exc.message} ({said})"
        raise
    if chosen is req and _held_back(plan):
        trial = await _past_lesson(with_, req)
        if trial is not None:
            return req, trial, True
    return chosen, plan, False


def _held_back(plan: Plan) -> bool:
    """Whether ``plan`` had to trim the request to fit its window."""
    before, budget = plan.tokens_before, plan.budget
    return before is not None and budget is not None and before > budget.messages


async def _past_lesson(with_: Planning, req: WireRequest) -> Plan | None:
    """``req`` planned without the lesson that held it back, when it is the one let through;
    else None."""
    learner, model = req.learns_as or req.team, req.spec.name
    models, trimming = with_.models, with_.trimming
    if models.lowered(req.spec, learner) is None:
        return None
    due = models.learned.due(
        learner, model, trimming.learned_retry_seconds, trimming.learned_retry_requests
    )
    if not due:
        return None
    log.info("team %s: a request of %s is let through past its learned window", req.team, model)
    req.window = models.window(req.spec, learner, req.cap, learned=False)
    plan = await first_plan(with_.planner, trimming, req)
    plan.actions = [*plan.actions, RETRIED]
    return plan


def learned_note(models: Models, trimming: Trimming, req: WireRequest) -> str | None:
    """What a refusal that rests on a learned window tells the client; None when none is in
    force."""
    learner, model = req.learns_as or req.team, req.spec.name
    lowered = models.lowered(req.spec, learner)
    if lowered is None:
        return None
    at = models.learned.learned_at(learner, model)
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at else "before a restart"
    again = " or ".join(
        part
        for part in (
            f"{trimming.learned_retry_seconds:g} s" if trimming.learned_retry_seconds else "",
            f"{trimming.learned_retry_requests} requests held back"
            if trimming.learned_retry_requests
            else "",
        )
        if part
    )
    retry = f"a request is let through past it after {again}" if again else "it is never retried"
    return (
        f"the window of {model} for {learner} is {lowered} tokens (the upstream's units), "
        f"learned from the upstream's overflow errors at {when}; {retry}; to forget it: "
        f"contextwarden windows forget {model} --team {learner} (the proxy stopped), or "
        f"DELETE /admin/learned-windows/{learner}/{model} with the admin key"
    )
