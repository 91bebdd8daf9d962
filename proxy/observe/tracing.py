"""OpenTelemetry spans and metrics, in the GenAI semantic conventions (imported only when the
``OTEL_*`` variables turn it on: proxy/observe/otel.py).

Spans, for each fitted request:

- the request (SERVER, ``chat {model}``): ``gen_ai.operation.name``, ``gen_ai.provider.name`` (and
  the older ``gen_ai.system``), ``gen_ai.request.model`` (the model the client asked for),
  ``gen_ai.response.model`` (the one the upstream says answered), the answer's usage
  (``gen_ai.usage.input_tokens``, ``output_tokens``, ``cache_read.input_tokens``,
  ``cache_creation.input_tokens``, where the upstream states them; a stream's at its end, when the
  span ends), and what the proxy did as ``contextwarden.*``: the team, policy, format, the
  prompt's tokens before and after, the window, the actions, retries, checkpoint and prefix;
- each upstream attempt (CLIENT), the overflow retries included: the model sent to, the server,
  the attempt's number, the plan's tokens, window and actions, the status, and whether the
  upstream refused it as a context overflow (with the figures it stated); it lasts to the
  answer's verdict (a stream's first events);
- each summarizer call (CLIENT, ``contextwarden.summarizer``), with its usage.

Metrics beside Prometheus's (proxy/observe/metrics.py), from the same ``Outcome`` and with the
same bounded attributes: requests, rewritten requests, prompt tokens before and after, tokens
saved, overflow retries, the proxy's overhead and the upstream's latency; and the conventions'
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache, partial
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from starlette.responses import Response, StreamingResponse

from proxy.errors import ProxyError
from proxy.observe import otel_numbers as numeric
from proxy.observe.genai import (
    INPUT,
    OUTPUT,
    RESPONSE_MODEL,
    Answered,
    answered_body,
    answered_events,
    operation,
    provider,
    usage_attributes,
)
from proxy.observe.metrics import SECONDS, TOKEN_BUCKETS, UNCHANGED, Metrics
from proxy.observe.outcome import Outcome
from proxy.upstreams.forwarding import Reply, decoded
from strategies.budget import Budget

if TYPE_CHECKING:
    from proxy.config.catalog import Upstream
    from proxy.upstreams.overflows import Overflow

log = logging.getLogger("contextwarden")
NAME = "contextwarden"
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the name before gen_ai.provider.name, still read by many backends
REQUEST_MODEL = "gen_ai.request.model"
STATUS = "http.response.status_code"
ERROR = "error.type"
HEAD_BYTES = 16384  # a stream's start kept for its usage (Anthropic's message_start)
TAIL_BYTES = 65536  # and its end (the others' final usage)
EXEMPLARS = "OTEL_METRICS_EXEMPLAR_FILTER"
SHADOW = "shadow"  # a shadow mode request's action (proxy/edge/shadow.py), and its mode
SHADOW_PLAN = "contextwarden.shadow_plan"
# Shutdown's bound on exporting what is left: the pod's grace period gives background work 5 s
# (deploy/kubernetes), and a collector that does not answer must not take them.
SHUTDOWN_SECONDS = 2.5


class Planned(Protocol):
    """What an attempt's span says of the plan it sends (proxy/request/planning/plan.py's Plan:
    named by its shape, the request's layers being above this one)."""

    @property
    def actions(self) -> list[str]: ...

    @property
    def tokens_after(self) -> int | None: ...

    @property
    def budget(self) -> Budget | None: ...


P = TypeVar("P", bound=Planned)
Judged = Callable[[Reply, "Overflow | None"], None]

# The request being served, for what is learned of it deeper down (its Outcome, its attempts).
_current: ContextVar[Served | None] = ContextVar("contextwarden_served", default=None)


@dataclass(kw_only=True, slots=True)
class Served:
    """One request's span, and what its attempts told it."""

    span: Span
    name: str  # the operation, and the model the client asked for once known
    # Set on the span once, as it ends (one call: each one takes the span's lock).
    attributes: dict[str, Any] = field(default_factory=dict)
    pending: list[Span] = field(default_factory=list)  # attempts awaiting their verdict
    labels: dict[str, Any] = field(default_factory=dict)  # its metrics' (bounded) attributes

    def close_pending(self) -> None:
        for span in self.pending:
            span.end()
        self.pending.clear()


class Telemetry:
    """The process's tracer and instruments; built once at start-up (``build``), shut down
    (flushed) at shutdown."""

    def __init__(
        self,
        tracers: TracerProvider | None = None,
        meters: MeterProvider | None = None,
        exporters: Sequence[SpanExporter | MetricExporter] = (),
    ) -> None:
        self._tracers, self._meters = tracers, meters
        self._exporters = exporters  # stopped at shutdown's deadline, their retries with them
        own = _version()
        self.tracer = tracers.get_tracer(NAME, own) if tracers else trace.NoOpTracer()
        self.instruments = Instruments(meters.get_meter(NAME, own)) if meters else None
        # A model's metric attribute (Metrics.model_label: configured, else "other").
        self.label: Callable[[str], str] = lambda model: "other"

    def beside(self, metrics: Metrics) -> None:
        """Told each request's Outcome as Prometheus is, and labelling models as it does."""
        metrics.also, self.label = self.recorded, metrics.model_label
        metrics.also_shadow = self.shadow_planned

    def flush(self) -> None:
        """Export what is waiting now (blocking; python -m bench.otel counts its cost)."""
        if self._tracers is not None:
            self._tracers.force_flush()
        if self._meters is not None:
            self._meters.force_flush()

    def shutdown(self, seconds: float = SHUTDOWN_SECONDS) -> None:
        """Export what is left and stop the exporters, in ``seconds`` at most (blocking: run off
        the event loop). The SDK waits for a collector that does not answer (its retries, each
        export's timeout) well past a pod's grace period: traces and metrics are shut down side
        by side in threads of their own, and what they have not exported by the deadline is
        dropped, said once."""
        steps: list[Callable[[], object]] = []
        if self._tracers is not None:
            steps.append(self._tracers.shutdown)
        if self._meters is not None:
            steps.append(partial(self._meters.shutdown, timeout_millis=seconds * 1000))
        threads = [threading.Thread(target=s, name="otel-shutdown", daemon=True) for s in steps]
        deadline = time.monotonic() + seconds
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in threads):
            log.warning(
                "OpenTelemetry: what was left was not exported within %.1f s of shutdown "
                "(the collector did not take it): dropped",
                seconds,
            )
            for exporter in self._exporters:  # ends their retries (the threads are daemons)
                exporter.shutdown()

    async def served(self, fmt: str, handler: Callable[[], Awaitable[Response]]) -> Response:
        """``handler``'s response to a request in the wire format ``fmt``, inside the request's
        span; a streamed answer's span ends with the stream."""
        op = operation(fmt)
        attributes = {OPERATION: op, "contextwarden.format": fmt}
        span = self.tracer.start_span(op, kind=SpanKind.SERVER, attributes=attributes)
        served = Served(span=span, name=op, labels={OPERATION: op})
        token = otel_context.attach(trace.set_span_in_context(span))
        mark = _current.set(served)
        try:
            response = await handler()
        except BaseException as exc:  # recorded on the span, a cancellation too, and re-raised
            status = exc.status if isinstance(exc, ProxyError) else 500
            self._finish(served, status, Answered(), type(exc).__name__)
            raise
        finally:
            _current.reset(mark)
            otel_context.detach(token)
        if isinstance(response, StreamingResponse):
            chunks = cast(AsyncIterator[bytes], response.body_iterator)
            response.body_iterator = self._relayed(served, response.status_code, chunks)
        else:
            self._finish(served, response.status_code, _answer_of(response))
        return response

    async def _relayed(
        self, served: Served, status: int, chunks: AsyncIterator[bytes]
    ) -> AsyncIterator[bytes]:
        """``chunks`` relayed unchanged; at the end, what their first and last events said."""
        head: list[bytes] = []
        held = size = 0
        tail: deque[bytes] = deque()
        dropped = False  # whether the tail still follows the head, or chunks between were let go
        try:
            async for chunk in chunks:
                if held < HEAD_BYTES:
                    head.append(chunk)
                    held += len(chunk)
                else:
                    tail.append(chunk)
                    size += len(chunk)
                    while size - len(tail[0]) >= TAIL_BYTES:
                        size -= len(tail.popleft())
                        dropped = True
                yield chunk
        finally:
            kept = [b"".join(head), b"".join(tail)]
            found = answered_events(kept if dropped else [b"".join(kept)])
            self._finish(served, status, found)

    def _finish(
        self, served: Served, status: int, answered: Answered, error: str | None = None
    ) -> None:
        span = served.span
        served.close_pending()
        attributes = served.attributes
        attributes[STATUS] = status
        attributes.update(answered.attributes())
        if error is not None or failed(status):
            attributes[ERROR] = error or str(status)
        span.update_name(served.name)
        span.set_attributes(attributes)
        if ERROR in attributes:  # a refusal (4xx, the proxy's or the upstream's) too
            span.set_status(Status(StatusCode.ERROR))
        if self.instruments is not None and answered.usage is not None:
            self.instruments.token_usage(attributes, served.labels)
        span.end()

    def recorded(self, o: Outcome, model: str) -> None:
        """A request's ``Outcome`` (from Metrics.record): on its span, and in the metrics;
        ``model`` is its bounded label."""
        served = _current.get()
        if served is not None:
            asked = _asked(o)
            if asked != "-":
                served.name = f"{operation(o.format)} {asked}"
                served.attributes[REQUEST_MODEL] = asked
            served.attributes.update(outcome_attributes(o, asked))
            served.labels[REQUEST_MODEL] = model
        if self.instruments is not None:
            self.instruments.record(o, model)

    def shadow_planned(self, o: Outcome, overflowed: bool) -> None:
        """A shadow request's plan, made after its answer (proxy/edge/shadow.py): a span of its
        own under the request's (which has ended by then), its figures as
        ``contextwarden.shadow.*``."""
        served = _current.get()  # the plan's task was started inside the request's context
        parent = trace.set_span_in_context(served.span) if served is not None else None
        attributes = shadow_attributes(o, overflowed)
        self.tracer.start_span(SHADOW_PLAN, parent, SpanKind.INTERNAL, attributes).end()

    def attempts(
        self, send: Callable[[P], Awaitable[Reply]], model: str, fmt: str, upstream: Upstream
    ) -> tuple[Callable[[P], Awaitable[Reply]], Judged]:
        """The overflow loop's ``send`` and ``judged`` (proxy/overflow/retry.py) for a request
        to ``model`` in ``fmt`` through ``upstream``: each attempt in a span of its own, from
        its sending to its verdict."""
        served = _current.get()
        common: dict[str, Any] = {
            OPERATION: operation(fmt),
            PROVIDER: provider(upstream),
            SYSTEM: provider(upstream),
            REQUEST_MODEL: model,
            **_server(upstream.base_url),
        }
        labels = {k: common[k] for k in (OPERATION, PROVIDER, "server.address") if k in common}
        labels[REQUEST_MODEL] = self.label(model)
        if served is not None:
            served.attributes[PROVIDER] = served.attributes[SYSTEM] = common[PROVIDER]
            served.labels[PROVIDER] = common[PROVIDER]
        sent: list[tuple[Span, float]] = []
        count = 0

        async def traced(plan: P) -> Reply:
            nonlocal count
            count += 1
            attributes = {**common, **plan_attributes(plan), "contextwarden.attempt": count}
            name = f"{common[OPERATION]} {model}"
            span = self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
            if served is not None:
                if plan.budget is not None:  # the window the request was last fitted to
                    served.attributes["contextwarden.window"] = plan.budget.window
                served.pending.append(span)
            started = time.perf_counter()
            try:
                reply = await send(plan)
            except BaseException as exc:  # recorded on the span, a cancellation too, and re-raised
                span.set_attribute(ERROR, type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR))
                _ended(served, span)
                raise
            sent.append((span, started))
            return reply

        def judged(reply: Reply, overflow: Overflow | None) -> None:
            if not sent:
                return
            span, started = sent.pop()
            span.set_attributes(reply_attributes(reply, overflow))
            if overflow is not None or failed(reply.status):
                span.set_status(Status(StatusCode.ERROR))
            if self.instruments is not None:
                self.instruments.duration(labels, time.perf_counter() - started, reply.status)
            _ended(served, span)

        return traced, judged

    async def summarized(
        self, call: Callable[[], Awaitable[Any]], model: str, base: str | None, max_tokens: int
    ) -> Any:
        """A summarizer call (litellm's answer) to ``model`` (litellm's name for it) at
        ``base``, inside a span of its own."""
        vendor, slash, _ = model.partition("/")
        attributes: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: vendor if slash else "openai",
            SYSTEM: vendor if slash else "openai",
            REQUEST_MODEL: model,
            "gen_ai.request.max_tokens": max_tokens,
            "contextwarden.summarizer": True,
            **_server(base),
        }
        name = f"chat {model}"
        span = self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        try:
            response = await call()
        except BaseException as exc:  # recorded on the span, a cancellation too, and re-raised
            span.set_attribute(ERROR, type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR))
            span.end()
            raise
        said = _litellm_usage(response)
        span.set_attributes(said)
        if self.instruments is not None:  # a configured model: a bounded label
            labels = {k: attributes[k] for k in (OPERATION, PROVIDER, REQUEST_MODEL)}
            self.instruments.token_usage(said, {**labels, "contextwarden.summarizer": True})
        span.end()
        return response


def failed(status: int) -> bool:
    """Whether an answer with ``status`` is an error on a span (``error.type``, the status as
    a string, and status ERROR): any that is not 2xx, a refusal included."""
    return not 200 <= status < 300


def _ended(served: Served | None, span: Span) -> None:
    if served is not None and span in served.pending:
        served.pending.remove(span)
    span.end()


def plan_attributes(plan: Planned) -> dict[str, Any]:
    out: dict[str, Any] = {"contextwarden.actions": list(plan.actions)}
    if plan.tokens_after is not None:
        out["contextwarden.tokens_after"] = plan.tokens_after
    if plan.budget is not None:
        out["contextwarden.window"] = plan.budget.window
    return out


def reply_attributes(reply: Reply, overflow: Overflow | None) -> dict[str, Any]:
    out: dict[str, Any] = {STATUS: reply.status}
    if overflow is not None:
        out["contextwarden.overflow"] = True
        out[ERROR] = "context_overflow"
        if overflow.limit:
            out["contextwarden.overflow.limit"] = overflow.limit
        if overflow.prompt:
            out["contextwarden.overflow.prompt"] = overflow.prompt
    elif failed(reply.status):
        out[ERROR] = str(reply.status)
    elif reply.body is not None:
        out.update(answered_body(decoded(reply.body, reply.headers)).attributes())
    return out


def shadow_attributes(o: Outcome, overflowed: bool) -> dict[str, Any]:
    """What a shadow plan would have done (proxy/observe/shadow.py counts the same)."""
    out: dict[str, Any] = {
        "contextwarden.mode": SHADOW,
        "contextwarden.team": o.team,
        "contextwarden.shadow.actions": list(o.actions),
        "contextwarden.shadow.upstream_overflow": overflowed,
    }
    if o.tokens_before is not None and o.tokens_after is not None:
        out["contextwarden.shadow.tokens_before"] = o.tokens_before
        out["contextwarden.shadow.tokens_after"] = o.tokens_after
        out["contextwarden.shadow.tokens_saved"] = max(0, o.tokens_before - o.tokens_after)
    if o.checkpoint is not None:
        out["contextwarden.shadow.checkpoint"] = o.checkpoint
    if o.prefix is not None:
        out["contextwarden.shadow.prefix"] = o.prefix
    if o.costs is not None:
        out["contextwarden.shadow.dollars_saved_estimated"] = round(o.costs.saved, 6)
    return out


def outcome_attributes(o: Outcome, asked: str) -> dict[str, Any]:
    """What the proxy did (the upstream's time is its attempts' spans', the tokens saved
    before minus after: neither is repeated, each attribute costs its export)."""
    out: dict[str, Any] = {
        "contextwarden.team": o.team,
        "contextwarden.actions": list(o.actions),
        "contextwarden.retries": o.retries,
        "contextwarden.stream": o.stream,
        "contextwarden.overhead_ms": round(o.overhead * 1000, 3),
    }
    optional = {
        "contextwarden.policy": o.policy,
        "contextwarden.model": o.model if o.model not in ("-", asked) else None,  # a fallback
        "contextwarden.tokens_before": o.tokens_before,
        "contextwarden.tokens_after": o.tokens_after,
        "contextwarden.checkpoint": o.checkpoint,
        "contextwarden.prefix": o.prefix,
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    if SHADOW in o.actions:  # forwarded as sent; its plan is its own span's (shadow_planned)
        out["contextwarden.mode"] = SHADOW
    if o.cached_tokens:
        out["contextwarden.cached_tokens_estimated"] = o.cached_tokens
    return out


def _asked(o: Outcome) -> str:
    """The model the client asked for: a fallback's action names it (``fallback a->b``)."""
    for action in o.actions:
        name, _, detail = action.partition(" ")
        if name == "fallback" and "->" in detail:
            return detail.split("->", 1)[0]
    return o.model


def _answer_of(response: Response) -> Answered:
    """What a response read whole says (a JSON answer; nothing for an error or another)."""
    body = bytes(response.body) if response.status_code < 400 else b""
    if not body or (b'"usage"' not in body and b'"model"' not in body):
        return Answered()
    encoding = response.headers.get("content-encoding")
    return answered_body(decoded(body, [("content-encoding", encoding)] if encoding else []))


def _litellm_usage(response: Any) -> dict[str, Any]:
    """The usage and model of a litellm answer (its usage is an OpenAI-shaped object)."""
    out: dict[str, Any] = {}
    model = getattr(response, "model", None)
    if isinstance(model, str) and model:
        out[RESPONSE_MODEL] = model
    usage = getattr(response, "usage", None)
    if usage is None:
        return out
    dumped = usage.model_dump() if hasattr(usage, "model_dump") else usage
    if isinstance(dumped, dict):
        out.update(usage_attributes(dumped))
    return out


@lru_cache(maxsize=256)
def _server(base_url: str | None) -> dict[str, Any]:
    if not base_url:
        return {}
    parts = urlsplit(base_url)
    if not parts.hostname:
        return {}
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {"server.address": parts.hostname, "server.port": port}


def _version() -> str:
    try:
        return version(NAME)
    except PackageNotFoundError:
        return "0"


class Tally:
    """A counter's values by attributes, observed when the metrics are collected (an observable
    counter's callback, in the exporter's thread): a dict increment on the request path instead
    of the SDK's work for each measurement."""

    def __init__(self) -> None:
        self.counts: dict[tuple[tuple[str, Any], ...], float] = {}

    def add(self, value: float, *attributes: tuple[str, Any]) -> None:
        self.counts[attributes] = self.counts.get(attributes, 0) + value

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        # list(): one step under the GIL, while the event loop's thread may add a key.
        return [Observation(value, dict(key)) for key, value in list(self.counts.items())]


class Instruments:
    """The metrics, as Prometheus has them (proxy/observe/metrics.py), through an OTel Meter,
    with the same bounded attributes (a model is its label: configured, else ``other``)."""

    def __init__(self, meter: Meter) -> None:
        tokens, seconds = list(TOKEN_BUCKETS), list(SECONDS)
        self.requests, self.rewritten, self.saved, self.retries = Tally(), Tally(), Tally(), Tally()
        for name, unit, doc, tally in (
            ("contextwarden.requests", "{request}", "Fitted requests", self.requests),
            ("contextwarden.rewritten_requests", "{request}", "Requests changed, by action",
             self.rewritten),
            ("contextwarden.tokens_saved", "{token}", "Prompt tokens removed before forwarding",
             self.saved),
            ("contextwarden.overflow_retries", "{retry}", "Retries after an upstream overflow",
             self.retries),
        ):  # fmt: skip
            meter.create_observable_counter(name, [tally.observe], unit, doc)
        self.tokens_before = meter.create_histogram(
            "contextwarden.prompt_tokens.before", "{token}", "Prompt tokens as sent by the client",
            explicit_bucket_boundaries_advisory=tokens,
        )  # fmt: skip
        self.tokens_after = meter.create_histogram(
            "contextwarden.prompt_tokens.after", "{token}", "Prompt tokens as forwarded",
            explicit_bucket_boundaries_advisory=tokens,
        )  # fmt: skip
        self.overhead = meter.create_histogram(
            "contextwarden.proxy.overhead", "s", "Time spent in the proxy, upstream excluded",
            explicit_bucket_boundaries_advisory=seconds,
        )  # fmt: skip
        self.upstream = meter.create_histogram(
            "contextwarden.upstream.latency", "s", "Upstream time to response headers",
            explicit_bucket_boundaries_advisory=seconds,
        )  # fmt: skip
        self.usage = meter.create_histogram(
            "gen_ai.client.token.usage", "{token}", "Tokens used, by type (input, output)",
            explicit_bucket_boundaries_advisory=tokens,
        )  # fmt: skip
        self.operation = meter.create_histogram(
            "gen_ai.client.operation.duration", "s", "Each upstream attempt, to its verdict",
            explicit_bucket_boundaries_advisory=seconds,
        )  # fmt: skip

    def record(self, o: Outcome, model: str) -> None:
        team, fmt = ("contextwarden.team", o.team), ("contextwarden.format", o.format)
        self.requests.add(1, team, fmt, ("contextwarden.model", model), (STATUS, o.status))
        for action in o.actions:  # by name: its figures would make a value per request
            if action not in UNCHANGED:
                name = action.partition(" ")[0]
                self.rewritten.add(1, team, fmt, ("contextwarden.action", name))
        labels = {"contextwarden.team": o.team}
        if o.tokens_before is not None and o.tokens_after is not None:
            self.tokens_before.record(o.tokens_before, labels)
            self.tokens_after.record(o.tokens_after, labels)
            self.saved.add(max(0, o.tokens_before - o.tokens_after), team)
        if o.retries:
            outcome = "recovered" if o.status < 400 else "failed"
            self.retries.add(o.retries, team, fmt, ("contextwarden.outcome", outcome))
        self.overhead.record(o.overhead)
        self.upstream.record(o.upstream, {"contextwarden.model": model})

    def token_usage(self, said: dict[str, Any], labels: dict[str, Any]) -> None:
        """``gen_ai.client.token.usage`` of an answer whose usage ``said`` holds."""
        for key, kind in ((INPUT, "input"), (OUTPUT, "output")):
            if key in said:
                self.usage.record(said[key], {**labels, "gen_ai.token.type": kind})

    def duration(self, labels: dict[str, Any], seconds: float, status: int) -> None:
        if failed(status):
            labels = {**labels, ERROR: str(status)}
        self.operation.record(seconds, labels)


def build(
    traces: Sequence[str] = (),
    metrics: Sequence[str] = (),
    *,
    span_exporter: SpanExporter | None = None,
    metric_reader: MetricReader | None = None,
    numbers: dict[str, float] | None = None,
) -> Telemetry:
    """The telemetry the named exporters ask for (``otlp``: OTLP/HTTP, configured by the
    ``OTEL_EXPORTER_OTLP_*`` variables; ``console``); ``span_exporter`` (exported at each span's
    end) and ``metric_reader`` beside them, as the tests give. ``numbers``: the numeric
    variables, checked (proxy/observe/otel_numbers.py; read here when not given)."""
    got = numeric.checked(os.environ) if numbers is None else numbers
    resource = _resource()
    span_exporters = [_span_exporter(name, got[numeric.OTLP_TRACES_TIMEOUT]) for name in traces]
    processors: list[SpanProcessor] = [
        BatchSpanProcessor(
            exporter,
            max_queue_size=int(got[numeric.BSP_MAX_QUEUE_SIZE]),
            schedule_delay_millis=got[numeric.BSP_SCHEDULE_DELAY],
            max_export_batch_size=int(got[numeric.BSP_MAX_EXPORT_BATCH_SIZE]),
            export_timeout_millis=got[numeric.BSP_EXPORT_TIMEOUT],
        )
        for exporter in span_exporters
    ]
    if span_exporter is not None:
        processors.append(SimpleSpanProcessor(span_exporter))
    tracers = None
    if processors:  # shut down by Telemetry.shutdown, in bounded time (not at exit: unbounded)
        tracers = TracerProvider(resource=resource, shutdown_on_exit=False)
        for processor in processors:
            tracers.add_span_processor(processor)
    timeout = got[numeric.OTLP_METRICS_TIMEOUT]
    metric_exporters = [_metric_exporter(name, timeout) for name in metrics]
    readers: list[MetricReader] = [
        PeriodicExportingMetricReader(
            exporter,
            export_interval_millis=got[numeric.METRIC_EXPORT_INTERVAL],
            export_timeout_millis=got[numeric.METRIC_EXPORT_TIMEOUT],
        )
        for exporter in metric_exporters
    ]
    if metric_reader is not None:
        readers.append(metric_reader)
    # No exemplars unless OTEL_METRICS_EXEMPLAR_FILTER asks: the SDK's default samples one for
    # every measurement in a traced request, a third of the metrics' cost for little.
    exemplars = None if EXEMPLARS in os.environ else AlwaysOffExemplarFilter()
    meters = None
    if readers:
        meters = MeterProvider(
            resource=resource,
            metric_readers=readers,
            exemplar_filter=exemplars,
            shutdown_on_exit=False,
        )
    return Telemetry(tracers, meters, [*span_exporters, *metric_exporters])


def _span_exporter(name: str, timeout: float) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(timeout=timeout)


def _metric_exporter(name: str, timeout: float) -> MetricExporter:
    if name == "console":
        return ConsoleMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(timeout=timeout)


def _resource() -> Resource:
    """The SDK's resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), named
    contextwarden when they do not name the service."""
    found = Resource.create({"service.version": _version()})
    if str(found.attributes.get("service.name", "")).startswith("unknown_service"):
        found = found.merge(Resource({"service.name": NAME}))
    return found
