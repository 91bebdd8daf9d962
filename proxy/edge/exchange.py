"""One fitted request, in any wire format (chat, Responses, Anthropic Messages, legacy
completions), in named stages, each handing the next an explicit value:

    handle                 the stages in turn, in the admission slot up to the plan
     ├─ read_in, take_in   intake: read the body, let the format parse and view it, resolve the
     │                     model, check its objects are the team's, make the request (-> Intake,
     │                     WireRequest; none in shadow mode: proxy/edge/shadow.py)
     ├─ make_plan          plan the first try, by its model or a fallback's (-> Planned)
     ├─ serve_compaction   a compaction the client asked for, served (-> Served)
     ├─ send_with_retry    send; on an upstream overflow shrink, re-fit, retry (proxy/overflow);
     │   │                 continue past recall calls (-> Sent)
     │   └─ send_once      pick the transport (HTTP to the format's path, or litellm)
     ├─ record             teach, claim, headers, the outcome counted and logged (-> Response)
     └─ refused            a refusal by the proxy itself, counted and logged

The client gets the upstream's own status, headers and bytes, plus ``x-contextwarden-*`` headers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

from proxy.edge.auth import Principal
from proxy.edge.intake import Intake, build_request, made_request, read_request
from proxy.edge.ownership import answered_id, answered_ids, claiming
from proxy.edge.shadow import AsSent, Shadowing, shadowed
from proxy.edge.shadow import forward as shadow_forward
from proxy.errors import Invariant, ProxyError
from proxy.formats.anthropic_edits import reported_body, reported_stream
from proxy.formats.base import WireFormat
from proxy.headers import (
    UPSTREAM_TRUNCATED,
    cw_headers,
    decode_headers,
    refused_headers,
    upstream_headers,
)
from proxy.observe.outcome import Outcome
from proxy.overflow.fallbacks import Build
from proxy.overflow.relearning import Planning, planned
from proxy.overflow.retry import Retrying, overflow_of, send_with_overflow_retry
from proxy.paths import query_of
from proxy.providers.registry import provider_of
from proxy.request.compaction import Compactions, compaction, wants_compaction
from proxy.request.context_compaction import Summaries, carry, compaction_summary, made, paused
from proxy.request.fitting import Fitting, fitting_for
from proxy.request.kept_prefix import outcome_of, see_prefix
from proxy.request.lessons import Lessons, Teachers
from proxy.request.planning.plan import Plan
from proxy.request.recall import Round, recall_key, settle
from proxy.request.usage import answer, prompt_usage, tapped
from proxy.upstreams.forwarding import Reply, decoded, join_url, respond, rewrite_answer
from proxy.windows.advice import annotated, refusal_note
from proxy.wire import WireRequest

if TYPE_CHECKING:
    from collections.abc import Mapping

    from proxy.config.settings import Settings
    from proxy.edge.admission import Admission
    from proxy.edge.ownership import Owners
    from proxy.formats.reused_items import RecentItems
    from proxy.observe.metrics import Metrics
    from proxy.observe.tracing import Telemetry
    from proxy.providers.base import TransportName
    from proxy.request.conversations import PinMemory, PrefixTracker
    from proxy.runtime import Runtime
    from proxy.upstreams.forwarding import Transport
    from proxy.windows.advice import FirstRefusals
    from proxy.windows.discovery import Discovery
    from proxy.windows.models import Models, Route

log = logging.getLogger("contextwarden")


async def handle(request: Request, rt: Runtime, fmt: WireFormat) -> Response:
    """One request, through its stages: intake (``read_in``, ``take_in``), plan (``make_plan``),
    send with retry (``send_with_retry``), record (``record``); a refusal by the proxy itself
    is counted and logged too (``refused``). The runtime is unpacked here, once: each stage is
    handed what it uses (tests/proxy/edge/test_dependencies.py)."""
    clock = UpstreamClock()
    rt.shadows.arrived()  # shadow plans wait for a quiet moment (proxy/edge/background.py)
    asked = Asked()
    owners = rt.owners if rt.settings.auth == "keys" else None  # a team's stored objects
    intaking = Intaking(
        settings=rt.settings, models=rt.models, admission=rt.admission, items=rt.items,
        pins=rt.pins, owners=owners, discovery=rt.windows.discovery,
    )  # fmt: skip
    planning = Planning(planner=rt.planner, models=rt.models, trimming=rt.settings.trimming)
    try:
        who = rt.auth.team(request.headers, query_of(request.scope))
        asked.team = who.team
        # The body, and the CPU-bound part (parse, view, count, fit), are admitted first
        # (proxy/edge/admission.py).
        async with rt.admission.admit(request, who.team) as body:
            intake = await read_in(intaking, fmt, who, body, request.headers)
            asked.model, asked.stream = intake.spec.name, bool(intake.payload.get("stream"))
            req = await take_in(intaking, intake, who, request.headers)
            build = builder(intaking, who, request.headers, fmt, rt.items)
            planned = (
                await make_plan(planning, req, body, build)
                if req is not None and not answered_by_compaction(req)
                else None
            )
        sending = Sending(
            request=request, who=who, clock=clock, transports=rt.transports,
            telemetry=rt.telemetry,
        )  # fmt: skip
        if req is None:  # shadow mode: sent as it came, made and planned after its answer
            shadowing = Shadowing(
                metrics=rt.metrics, background=rt.shadows, traced=rt.telemetry is not None,
                planning=planning, prefixes=rt.prefixes, settle=rt.settle,
            )  # fmt: skip
            return await forward_shadow(sending, intaking, shadowing, intake)
        reserve = rt.settings.trimming.reserve_output_tokens
        summaries = Summaries(
            compactor=rt.compactor, planner=rt.planner, reserve_output_tokens=reserve
        )
        if planned is None:  # answered outside the admission slot: a summary takes its time
            by = Compactions(support=rt.compactions, store=rt.store, summaries=summaries)
            return await compact(sending, by, rt.metrics, req)
        served = await serve_compaction(summaries, planned.req)  # outside the slot, as above
        if served.alone is not None:
            return await answered_alone(rt.metrics, planned.req, served.alone, clock.started)
        teachers = Teachers(
            windows=rt.windows, models=rt.models, usages=rt.usages, metrics=rt.metrics
        )
        continuations = builder(intaking, who, request.headers, fmt, None)
        continuing = Continuing(planning=planning, teachers=teachers, build=continuations)
        sent = await send_with_retry(sending, continuing, planned)
    except ProxyError as exc:  # refused by the proxy itself: counted and logged too
        refused(rt.metrics, fmt, asked, exc, clock)
        raise
    recording = Recording(
        metrics=rt.metrics, owners=owners, prefixes=rt.prefixes, settle=rt.settle,
        told=rt.told, log_content=rt.settings.log_content,
    )  # fmt: skip
    return await record(recording, sending, asked, sent, served.carried)


@dataclass(frozen=True, slots=True, kw_only=True)
class Intaking:
    """What intake reads a request and makes it with (proxy/edge/intake.py): the settings, the
    models, the admission (whose worker reads a large body), the recent items and the pins, the
    owners of stored objects (``keys`` mode only, else None: proxy/edge/ownership.py), and the
    models' window discovery (proxy/windows/discovery.py)."""

    settings: Settings
    models: Models
    admission: Admission
    items: RecentItems
    pins: PinMemory
    owners: Owners | None
    discovery: Discovery


@dataclass(frozen=True, slots=True, kw_only=True)
class Sending:
    """How one client's call goes upstream: its HTTP request (whose headers and query go on),
    who made it, the clock of the upstream's time, the transports by name
    (proxy/upstreams/transports.py), OpenTelemetry's attempt spans (None when off)."""

    request: Request
    who: Principal
    clock: UpstreamClock
    transports: Mapping[TransportName, Transport]
    telemetry: Telemetry | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Continuing:
    """What the send stage fits a request again with (the planner, the trimming settings),
    where its lessons go (proxy/request/lessons.py), and how a recall's continuation is built
    (proxy/request/recall.py)."""

    planning: Planning
    teachers: Teachers
    build: Build


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording:
    """Where the record stage puts what an answer says: the metrics, the owners of the objects
    it makes (``keys`` mode only, else None), the prefix it kept and the store's writes,
    settled before it leaves (proxy/stores/writer.py), the first refusals of unknown windows
    (proxy/windows/advice.py), and whether the log shows the messages."""

    metrics: Metrics
    owners: Owners | None
    prefixes: PrefixTracker
    settle: Callable[[], Awaitable[None]]
    told: FirstRefusals
    log_content: bool


@dataclass(slots=True, kw_only=True)
class Asked:
    """What the client asked, as far as it is known when the proxy refuses it: its team, its
    model, whether it streams."""

    team: str = "-"
    model: str = "-"
    stream: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """What the plan stage hands the send stage: the request to send (the client's, or a
    fallback model's), its first plan, how to fit it again, and whether it is let through past
    a learned window (proxy/overflow/relearning.py)."""

    req: WireRequest
    plan: Plan
    fitting: Fitting
    trial: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    """A compaction the proxy serves (proxy/request/context_compaction.py): the answer it
    makes alone, without the model's turn (a compaction that pauses), or the one the model's
    answer carries; neither when none is due or none could be made."""

    alone: Response | None = None
    carried: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """What the send stage hands the record stage: the request sent, the answer that stands
    and the plan it answered, the retries and recalls it took, its lessons."""

    req: WireRequest
    conversation: bool  # a conversation whose prefix the proxy tracks
    lessons: Lessons
    reply: Reply
    plan: Plan
    retries: int = 0
    recalled: int = 0


async def read_in(
    intaking: Intaking, fmt: WireFormat, who: Principal, body: bytes, headers: Headers
) -> Intake:
    """Intake, first: the body parsed and checked, its model resolved (proxy/edge/intake.py),
    in the admission slot's worker when large."""
    settings, models, items = intaking.settings, intaking.models, intaking.items
    return await intaking.admission.run(
        body, read_request, body, headers, settings, models, who, fmt, items
    )


async def take_in(
    intaking: Intaking, intake: Intake, who: Principal, headers: Headers
) -> WireRequest | None:
    """Intake, then: a Responses request may name only its team's objects
    (proxy/edge/ownership.py); the request made (its view, window, conversation) and its
    model's window asked of its server the first time. None in shadow mode: sent as it came
    once read and checked, made after (proxy/edge/shadow.py)."""
    owners, models, pins = intaking.owners, intaking.models, intaking.pins
    if intake.fmt.api == "responses" and owners is not None:
        capped = bool(who.config.max_context_tokens)
        await owners.check(who.team, capped, intake.payload)
    if shadowed(models, intake, who):
        return None
    body = intake.body
    req = await intaking.admission.run(body, made_request, intake, headers, models, who, pins)
    await discover(intaking, req, who)
    return req


def answered_by_compaction(req: WireRequest) -> bool:
    """Whether the proxy answers ``req`` as a compaction request, unplanned: Codex's
    compaction trigger (proxy/request/compaction.py), or a request that is only Anthropic's
    compaction (proxy/request/context_compaction.py)."""
    return wants_compaction(req) or (req.compaction is not None and req.compaction.only)


def builder(
    intaking: Intaking,
    who: Principal,
    headers: Headers,
    fmt: WireFormat,
    items: RecentItems | None,
) -> Build:
    """How another body of the request's becomes a request of its own, in the admission
    slot's worker when large: a fallback model's (``items``: the recent items it may reuse),
    or a recall's continuation (none)."""
    args = (headers, intaking.settings, intaking.models, who, fmt, intaking.pins, items)

    async def build(other: bytes) -> WireRequest:
        return await intaking.admission.run(other, build_request, other, *args)

    return build


async def make_plan(planning: Planning, req: WireRequest, body: bytes, build: Build) -> Planned:
    """The plan stage: the first plan, by the request's own model or the first fallback that
    fits better (proxy/overflow/fallbacks.py; ``build`` makes its request), past a learned
    window when it is due (proxy/overflow/relearning.py), and how the chosen request is fitted
    again (proxy/request/fitting.py)."""
    chosen, first, trial = await planned(planning, req, body, build)
    fitting = fitting_for(planning.planner, planning.trimming, chosen)
    return Planned(req=chosen, plan=first, fitting=fitting, trial=trial)


async def serve_compaction(summaries: Summaries, req: WireRequest) -> Served:
    """The compaction the proxy serves for ``req``, when it asked for one and its input is
    past the threshold (proxy/request/context_compaction.py)."""
    if req.compaction is None:
        return Served()
    summary = await compaction_summary(summaries, req)
    if summary is None:
        return Served()
    if req.compaction.pause:
        return Served(alone=paused(req, summary))
    return Served(carried=made(req, summary))


async def send_with_retry(sending: Sending, continuing: Continuing, planned: Planned) -> Sent:
    """The send stage: the plan sent, shrunk and sent again while the upstream overflows
    (proxy/overflow/retry.py), then, when the model calls the recall tool, continued out of
    the client's sight (proxy/request/recall.py)."""
    req, fitting = planned.req, planned.fitting
    cap, trimming = sending.who.config.max_context_tokens, continuing.planning.trimming
    lessons = Lessons(continuing.teachers, req, fitting, cap, planned.trial)
    do = retrying(sending, req, fitting, lessons)
    reply, plan, retries = await send_with_overflow_retry(planned.plan, do, trimming)
    recalled = 0
    if plan.recall and reply.status == 200:
        rounds = recalling(sending, continuing, req, plan)
        reply, recalled = await settle(reply, req.fmt, req.payload, rounds)
    conversation = fitting.conversation
    return Sent(
        req=req,
        conversation=conversation,
        lessons=lessons,
        reply=reply,
        plan=plan,
        retries=retries,
        recalled=recalled,
    )


async def record(
    recording: Recording,
    sending: Sending,
    asked: Asked,
    sent: Sent,
    carried: dict[str, Any] | None,
) -> Response:
    """The record stage: what the answer teaches (the window, the calibration, the prefix
    kept) and says in ``x-contextwarden-*`` headers, the objects it makes claimed for the
    team, a compaction ``carried`` put first in it, and the outcome counted and logged."""
    req, reply, plan = sent.req, sent.reply, sent.plan
    who, clock, owners = sending.who, sending.clock, recording.owners
    await tell_unknown_window(recording.told, req, reply, plan)
    if owners is not None and reply.status == 200 and stores_objects(req.fmt, req.payload):
        await claim_answer(owners, who.team, reply)
    seen = await see_prefix(recording.prefixes, req, plan) if sent.conversation else None
    await recording.settle()
    # Said only to a caller with a credential: callers without one cannot be told apart, and
    # the state would say whether another one sent this conversation (an oracle).
    told = seen is not None and who.caller is not None
    prefix = [("x-contextwarden-prefix", seen.state)] if told and seen else []
    # After recalls, the answer is to a continuation the proxy planned: its usage is not this
    # plan's, so it teaches nothing.
    metrics = recording.metrics
    learned = (
        await observe_usage(metrics, req, sent.lessons, reply, plan) if not sent.recalled else []
    )
    # A fallback answered: the model that did (``asked.model`` is the one the client named).
    answered = [("x-contextwarden-model", req.spec.name)] if req.spec.name != asked.model else []
    more = [("x-contextwarden-recalled", str(sent.recalled))] if sent.recalled else []
    if req.context_edits is not None and reply.status == 200:
        report_edits(reply, req.context_edits, bool(req.payload.get("stream")))
    if carried is not None and reply.status == 200 and carry(reply, carried, req.fmt.api):
        plan = replace(plan, actions=[*plan.actions, "compaction-served"])
    if req.context_edits:  # served before the request was fitted: named first, by their type
        plan = replace(plan, actions=[*(e["type"] for e in req.context_edits), *plan.actions])
    said = [*cw_headers(plan, sent.retries), *prefix, *answered, *more, *learned]
    response = respond(reply, said)
    outcome = outcome_of(req, plan, seen, reply.status)
    outcome.retries, outcome.upstream = sent.retries, clock.seconds
    outcome.overhead = clock.overhead()
    metrics.record(outcome, req.view.messages if recording.log_content else None)
    return response


def refused(
    metrics: Metrics, fmt: WireFormat, asked: Asked, exc: ProxyError, clock: UpstreamClock
) -> None:
    """A request the proxy refused itself, counted and logged as the others are, and its
    error given the ``x-contextwarden-*`` headers it carries."""
    outcome = Outcome(
        team=asked.team,
        model=asked.model,
        status=exc.status,
        tokens_before=None,
        tokens_after=None,
        actions=[],
        retries=0,
        checkpoint=None,
        overhead=clock.overhead(),
        upstream=clock.seconds,
        stream=asked.stream,
        path=fmt.path,
        format=fmt.name,
    )
    metrics.record(outcome)
    exc.headers = refused_headers(exc)


def stores_objects(fmt: WireFormat, payload: dict[str, Any]) -> bool:
    """Whether the answer holds objects the upstream keeps, which other teams could name: a
    Responses answer's response and items, a chat completion asked to be stored."""
    return fmt.api == "responses" or payload.get("store") is True


async def claim_answer(owners: Owners, team: str, reply: Reply) -> None:
    """The answer's object ids are ``team``'s (proxy/edge/ownership.py): an answer read whole
    now, a stream's response id now and its items as they stream."""
    if reply.body is not None:
        await owners.claim(team, answered_ids(decoded(reply.body, reply.headers)))
        return
    made = answered_id(reply.peeked)
    if made is not None:
        await owners.claim(team, [made])
    if reply.stream is not None:
        reply.stream = claiming(reply.stream, partial(owners.claim, team))


async def forward_shadow(
    sending: Sending, intaking: Intaking, shadowing: Shadowing, intake: Intake
) -> Response:
    """A shadow mode request, sent as it came (proxy/edge/shadow.py); the rest of its intake
    and its plan made after its answer."""
    request, who, clock = sending.request, sending.who, sending.clock
    send = sending_as_sent(sending, intake, intaking.owners)
    later = partial(rest_of_intake, intaking, intake, request.headers, who)
    how = AsSent(send=send, made=later, started=clock.started, upstream=lambda: clock.seconds)
    return await shadow_forward(shadowing, intake, who, how)


def sending_as_sent(
    sending: Sending, intake: Intake, owners: Owners | None
) -> Callable[[Plan], Awaitable[Reply]]:
    """How a shadow mode request is sent (proxy/edge/shadow.py): once, to the upstream it
    addressed, timed as the upstream's, and the objects its answer makes claimed for its team,
    as on the request path (``owners``: in ``keys`` mode)."""
    who, clock = sending.who, sending.clock
    stores = stores_objects(intake.fmt, intake.payload)

    async def send(plan: Plan) -> Reply:
        sent = time.perf_counter()
        try:
            reply = await send_to(sending, intake.spec.route, intake.fmt, plan.body)
        finally:
            clock.add(time.perf_counter() - sent)
        if owners is not None and reply.status == 200 and stores:
            await claim_answer(owners, who.team, reply)
        return reply

    if sending.telemetry is None:
        return send
    # Its one attempt in a span, as the request path's are (proxy/observe/tracing.py); its
    # verdict is its answer's (an overflow is only read after, with the plan).
    spec = intake.spec
    traced, judged = sending.telemetry.attempts(
        send, spec.name, intake.fmt.name, spec.route.upstream
    )

    async def attempt(plan: Plan) -> Reply:
        reply = await traced(plan)
        judged(reply, None)
        return reply

    return attempt


async def compact(
    sending: Sending, by: Compactions, metrics: Metrics, req: WireRequest
) -> Response:
    """A compaction request, answered by the proxy or relayed whole (Codex's
    compaction_trigger: proxy/request/compaction.py; Anthropic's compaction parameter,
    served: proxy/request/context_compaction.py), counted and logged as the others are."""
    if req.compaction is not None and req.compaction.only:
        response = paused(req, await compaction_summary(by.summaries, req))
    else:
        response = await compaction(by, req, partial(send_once, sending, req))
    return await answered_alone(metrics, req, response, sending.clock.started)


async def answered_alone(
    metrics: Metrics, req: WireRequest, response: Response, started: float
) -> Response:
    """An answer the proxy made without the model's turn, counted and logged."""
    actions = response.headers.get("x-contextwarden-actions", "compaction-relayed")
    elapsed = time.perf_counter() - started
    outcome = Outcome(
        team=req.team,
        model=req.spec.name,
        status=response.status_code,
        tokens_before=None,
        tokens_after=None,
        actions=actions.split(","),
        retries=0,
        checkpoint=None,
        overhead=elapsed,
        upstream=0.0,
        stream=bool(req.payload.get("stream")),
        path=req.fmt.path,
        format=req.fmt.name,
    )
    metrics.record(outcome)
    return response


async def rest_of_intake(
    intaking: Intaking, intake: Intake, headers: Headers, who: Principal
) -> WireRequest:
    """A shadow request's rest of its intake, made after its answer (proxy/edge/shadow.py)."""
    body, models, pins = intake.body, intaking.models, intaking.pins
    req = await intaking.admission.run(body, made_request, intake, headers, models, who, pins)
    await discover(intaking, req, who)
    return req


async def discover(intaking: Intaking, req: WireRequest, who: Principal) -> None:
    """A model whose window is not configured has its server asked for it, the first time
    (proxy/windows/discovery.py); the request is fitted to what it said."""
    spec = req.spec
    if spec.configured:
        return
    if await intaking.discovery.ensure(spec.route.name, spec.route.upstream, spec.name):
        learner = req.learns_as or req.team
        req.window = intaking.models.window(spec, learner, who.config.max_context_tokens)


async def tell_unknown_window(
    told: FirstRefusals, req: WireRequest, reply: Reply, plan: Plan
) -> None:
    """The first overflow refusal of a model whose window was unknown says, inside the
    upstream's own error message and in the log, why it went untrimmed and the ways out."""
    if req.window is not None or reply.status < 400 or reply.body is None:
        return
    if await overflow_of(reply, plan.body) is None or not told.first(req.spec.name):
        return
    note = refusal_note(req.spec.name, req.spec.route.name)
    log.warning("%s", note)
    body = annotated(decoded(reply.body, reply.headers), note)
    if body is not None:
        reply.body = body
        reply.headers = [(k, v) for k, v in reply.headers if k.lower() != "content-encoding"]


async def observe_usage(
    metrics: Metrics, req: WireRequest, lessons: Lessons, reply: Reply, plan: Plan
) -> list[tuple[str, str]]:
    """What an answer says of its prompt: the upstream's count against ours and the request's
    need (proxy/request/lessons.py), and a Messages answer that stopped at the model's context
    window (counted, and left alone). A stream's usage comes at its end, through ``tapped``
    (or at its start: Anthropic's ``message_start``). The headers that say what it taught: an
    upstream that read less than it was sent."""
    if reply.status != 200:
        return []
    theirs = prompt_usage(reply, req.fmt)
    if reply.stream is not None:

        async def on_usage(final: int | None) -> None:
            await lessons.answered(plan, final or theirs)

        reply.stream = tapped(reply.stream, req.fmt, on_usage)
        return []
    short = await lessons.answered(plan, theirs)
    data = answer(reply) if req.fmt.name == "anthropic" else None
    if data is not None and data.get("stop_reason") == "model_context_window_exceeded":
        metrics.window_stops.labels(req.team, metrics.model_label(req.spec.name)).inc()
    return [(UPSTREAM_TRUNCATED, short)] if short else []


def report_edits(reply: Reply, applied: list[dict[str, Any]], stream: bool) -> None:
    """A 200 Messages answer to a request whose context editing the proxy served, with what
    the edits did where Anthropic's API says it (proxy/formats/anthropic_edits.py)."""
    whole = partial(reported_body, applied=applied)
    rewrite_answer(reply, whole, partial(reported_stream, applied=applied), stream)


def recalling(sending: Sending, continuing: Continuing, req: WireRequest, plan: Plan) -> Round:
    """How the request path continues ``req`` when the model calls the recall tool
    (proxy/request/recall.py): each continuation is built, planned and sent as a request of
    its own conversation, with the overflow retry, but never shown to the client."""
    planner, trimming = continuing.planning.planner, continuing.planning.trimming

    async def build(body: bytes, offer: bool) -> WireRequest:
        nxt = await continuing.build(body)
        nxt.continuation, nxt.offer_recall, nxt.recall_name = True, offer, plan.recall
        return nxt

    async def send(nxt: WireRequest) -> tuple[Reply, Plan]:
        fitting = fitting_for(planner, trimming, nxt)
        first = await fitting.first()
        lessons = Lessons(continuing.teachers, nxt, fitting, sending.who.config.max_context_tokens)
        reply, made, _ = await send_with_overflow_retry(
            first, retrying(sending, nxt, fitting, lessons), trimming
        )
        return reply, made

    recalls = planner.recalls
    if recalls is None or plan.budget is None or plan.recall is None:
        raise Invariant("a plan that offers recall has a budget and a memory of outputs")
    config = req.policy.config
    return Round(
        build=build,
        send=send,
        memory=recalls,
        conversation=recall_key(req),
        counter=req.counter(),
        budget=plan.budget.messages,
        max_recalls=config.max_recalls,
        name=plan.recall,
    )


@dataclass(slots=True)
class UpstreamClock:
    """Time spent waiting for the upstream, over every attempt: for its response headers and,
    of a stream, for the first events the overflow peek reads before relaying it (a reasoning
    model's first event can take seconds: they were counted as the proxy's overhead); and
    when the request arrived, for the proxy's own time (``overhead``)."""

    seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    def add(self, seconds: float) -> None:
        self.seconds += seconds

    def overhead(self) -> float:
        """The time since the request arrived, less the upstream's."""
        return time.perf_counter() - self.started - self.seconds


def retrying(sending: Sending, req: WireRequest, fitting: Fitting, lessons: Lessons) -> Retrying:
    """The overflow loop's collaborators for one request."""
    clock = sending.clock

    async def send(plan: Plan) -> Reply:
        sent = time.perf_counter()
        try:
            return await send_once(sending, req, plan)
        finally:  # a failed attempt's time is the upstream's too
            clock.seconds += time.perf_counter() - sent

    do = Retrying(
        send=send,
        refit=fitting.refit,
        budget_for=fitting.budget_for,
        learn=lessons.stated,
        refused=lessons.refused,
        recount=fitting.recount,
        lowers_output=fitting.lowers_output,
        with_output=fitting.with_output,
        output_floor=req.policy.config.min_output_tokens,
        waited=clock.add,
    )
    if sending.telemetry is None:
        return do
    # Each attempt in a span of its own, when OpenTelemetry is on (proxy/observe/tracing.py).
    spec = req.spec
    sent, judged = sending.telemetry.attempts(do.send, spec.name, req.fmt.name, spec.route.upstream)
    return replace(do, send=sent, judged=judged)


async def send_once(sending: Sending, req: WireRequest, plan: Plan) -> Reply:
    """``plan`` sent to the request's upstream, in its format's path."""
    # The caller's credential goes only to the upstream it addressed (a fallback model on
    # another upstream is reached with that upstream's own key).
    forward = sending.who.forward_client_auth and req.spec.route.name == req.addressed
    return await send_to(sending, req.spec.route, req.fmt, plan.body, forward)


async def send_to(
    sending: Sending, route: Route, fmt: WireFormat, body: bytes, forward: bool | None = None
) -> Reply:
    """``body`` sent to ``route``'s upstream, in ``fmt``'s path; with the caller's credential
    when ``forward`` (by default: when the team forwards it)."""
    request, who = sending.request, sending.who
    upstream, key = route.upstream, route.key
    forward = who.forward_client_auth if forward is None else forward
    headers = upstream_headers(decode_headers(request.headers.raw), upstream, key, forward)
    # The route's provider names the transport that sends to it (HTTP, litellm's call), which
    # takes the URL it needs: litellm's reads the upstream's config instead.
    transport = sending.transports[provider_of(upstream).transport]
    base = upstream.base_url
    url = join_url(base, fmt.path, query_of(request.scope)) if base else ""
    reply = await transport.send(upstream, "POST", url, headers, body)
    reply.broken = fmt.stream_error
    return reply
