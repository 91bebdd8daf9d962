"""OpenTelemetry (#56 item 3): each request's span, each upstream attempt's (the overflow retries
too) and each summarizer call's, in the GenAI semantic conventions with the trim's figures as
``contextwarden.*``; the metrics beside Prometheus's; OTLP/HTTP export set by the standard
``OTEL_*`` variables and off unless they are set; and the proxy without the SDK installed.

Two real stacks: one exports to the SDK's in-memory exporter and reader, one to an OTLP/HTTP
receiver on 127.0.0.1 that decodes the protobuf POSTs with opentelemetry-proto."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from proxy.observe import otel, otel_numbers
from proxy.observe.genai import answered_body, usage_attributes
from proxy.observe.tracing import SHUTDOWN_SECONDS, build

ROOT = Path(__file__).resolve().parents[3]
MODEL = "demo-model"


def conversation(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i} " + "lorem ipsum dolor " * 25})
        messages.append({"role": "assistant", "content": f"answer {i} " + "consectetur " * 25})
    return [*messages, {"role": "user", "content": "and the last one?"}]


def test_in_memory_spans_of_a_request_its_attempts_and_its_summaries(tmp_path: Path) -> None:
    """A chat request the proxy summarizes, whose upstream counts three times the proxy's count
    and refuses the first attempt as an overflow: the request's span, one span per attempt (the
    refused one marked), the summarizer's calls, all in one trace; and the metrics."""
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry = build(span_exporter=spans, metric_reader=reader)
    with ExitStack() as stack:
        upstream = stack.enter_context(BackgroundServer(create_upstream(2048, count_scale=3.0)))
        config = {
            "data_dir": str(tmp_path),
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "default_upstream": "demo",
            "models": {MODEL: {"context_window": 4096, "tokenizer": "o200k_base"}},
            "policies": {"default": {"summarize": True, "summarizer": {"summarize_unseen": True}}},
        }
        app = create_app(load_settings(None, **config), telemetry=telemetry)
        proxy = stack.enter_context(BackgroundServer(app))
        body = {"model": MODEL, "messages": conversation(30)}
        got = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=60)
    assert got.status_code == 200, got.text
    answered = got.json()["usage"]
    finished = spans.get_finished_spans()
    [request] = [s for s in finished if s.kind == SpanKind.SERVER]
    tried = sorted(
        (s for s in finished if s.attributes and "contextwarden.attempt" in s.attributes),
        key=lambda s: s.attributes["contextwarden.attempt"],  # type: ignore[index]
    )
    summaries = [
        s for s in finished if s.attributes and s.attributes.get("contextwarden.summarizer")
    ]

    said = dict(request.attributes or {})
    assert request.name == f"chat {MODEL}"
    assert said["gen_ai.operation.name"] == "chat"
    assert said["gen_ai.provider.name"] == said["gen_ai.system"] == "openai"
    assert said["gen_ai.request.model"] == said["gen_ai.response.model"] == MODEL
    assert said["gen_ai.usage.input_tokens"] == answered["prompt_tokens"]
    assert said["gen_ai.usage.output_tokens"] == answered["completion_tokens"]
    assert said["contextwarden.team"] == "default" and said["http.response.status_code"] == 200
    assert said["contextwarden.tokens_before"] > said["contextwarden.tokens_after"] > 0
    assert said["contextwarden.retries"] == 1
    assert {"summarize", "overflow-retry"} <= set(said["contextwarden.actions"])  # type: ignore[arg-type]
    assert 0 < said["contextwarden.window"] < 4096  # the window the retry fitted to
    assert said["contextwarden.checkpoint"].startswith("created")  # type: ignore[union-attr]

    assert [s.attributes["contextwarden.attempt"] for s in tried] == [1, 2]  # type: ignore[index]
    first, second = (dict(s.attributes or {}) for s in tried)
    assert first["contextwarden.overflow"] is True and first["http.response.status_code"] == 400
    assert first["contextwarden.overflow.limit"] == 2048 and first["contextwarden.window"] == 4096
    assert first["error.type"] == "context_overflow"
    assert second["http.response.status_code"] == 200 and "contextwarden.overflow" not in second
    assert "overflow-retry" in second["contextwarden.actions"]  # type: ignore[operator]
    assert second["gen_ai.usage.input_tokens"] == answered["prompt_tokens"]
    assert second["server.address"] == "127.0.0.1" and second["gen_ai.request.model"] == MODEL
    assert all(s.kind == SpanKind.CLIENT for s in [*tried, *summaries])

    # Some overflow the summarizer's window too (the upstream counts three times more): each
    # call says its usage, or why it failed.
    made = [dict(s.attributes or {}) for s in summaries]
    assert any(m.get("gen_ai.usage.input_tokens", 0) > 0 for m in made), made
    for call in made:
        assert call["gen_ai.request.model"] == f"openai/{MODEL}"
        assert call.get("gen_ai.usage.output_tokens") or call["error.type"] == "SummarizerOverflow"
    for child in [*tried, *summaries]:  # one trace, under the request
        assert child.parent is not None and child.parent.span_id == request.context.span_id
        assert child.context.trace_id == request.context.trace_id

    points = metric_points(reader)
    [(labels, count)] = points["contextwarden.requests"]
    assert count == 1 and labels["contextwarden.team"] == "default"
    assert labels["http.response.status_code"] == 200 and labels["contextwarden.model"] == MODEL
    assert [n for _, n in points["contextwarden.overflow_retries"]] == [1]
    kinds = {labels["gen_ai.token.type"] for labels, _ in points["gen_ai.client.token.usage"]}
    assert kinds == {"input", "output"}
    assert sum(n for _, n in points["gen_ai.client.operation.duration"]) == 2  # the attempts


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], float]]]:
    """Each metric's points: their attributes and their value (a histogram's count)."""
    out: dict[str, list[tuple[dict[str, Any], float]]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    value = getattr(point, "count", 0) if value is None else value
                    out.setdefault(metric.name, []).append((dict(point.attributes or {}), value))
    return out


CLAUDE = "claude-local"
EVENTS = [
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-local-20261201",
        "content": [], "stop_reason": None,
        "usage": {"input_tokens": 21, "cache_read_input_tokens": 1800,
                  "cache_creation_input_tokens": 300, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "cached, mostly"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                       "usage": {"output_tokens": 7}}),
    ("message_stop", {"type": "message_stop"}),
]  # fmt: skip


def sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(b"event: %s\ndata: %s\n\n" % (e.encode(), orjson.dumps(d)) for e, d in events)


def anthropic_upstream() -> Starlette:
    async def messages(request: Request) -> Response:
        await request.body()
        return StreamingResponse(iter([sse(EVENTS)]), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


def receiver(received: dict[str, list[bytes]]) -> Starlette:
    """An OTLP/HTTP collector's two paths: the protobuf bodies it is sent, kept."""

    async def export(request: Request) -> Response:
        assert request.headers["content-type"] == "application/x-protobuf"
        received.setdefault(request.url.path, []).append(await request.body())
        return Response(b"", 200, media_type="application/x-protobuf")

    paths = ("/v1/traces", "/v1/metrics")
    return Starlette(routes=[Route(p, export, methods=["POST"]) for p in paths])


def text(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [text(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def test_an_otlp_http_receiver_gets_the_spans_and_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export set by the standard variables alone: a streamed Anthropic answer whose usage states
    cache reads and writes reaches the client byte for byte, and its span (with the usage, the
    cache tokens, both models) and the request metrics reach the collector, flushed at shutdown."""
    received: dict[str, list[bytes]] = {}
    with ExitStack() as stack:
        collector = stack.enter_context(BackgroundServer(receiver(received)))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "contextwarden-test")
        # Nothing exported before shutdown, which must flush it all.
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        upstream = stack.enter_context(BackgroundServer(anthropic_upstream()))
        config = {
            "data_dir": str(tmp_path),
            "upstreams": {"claude": {"provider": "anthropic", "base_url": f"{upstream.url}/v1"}},
            "default_upstream": "claude",
            "models": {CLAUDE: {"context_window": 200000}},
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            body = {"model": CLAUDE, "max_tokens": 64, "stream": True,
                    "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
            headers = {"x-api-key": "sk-ant-caller", "anthropic-version": "2023-06-01"}
            got = httpx.post(f"{proxy.url}/v1/messages", json=body, headers=headers, timeout=30)
            assert got.status_code == 200 and got.content == sse(EVENTS)
            assert not received  # batched: exported at shutdown
    spans = []
    for raw in received["/v1/traces"]:
        export = ExportTraceServiceRequest.FromString(raw)
        for resource in export.resource_spans:
            service = {a.key: text(a.value) for a in resource.resource.attributes}
            assert service["service.name"] == "contextwarden-test"
            spans += [s for scope in resource.scope_spans for s in scope.spans]
    by_kind = {s.kind: s for s in spans}
    server, client = by_kind[2], by_kind[3]  # SPAN_KIND_SERVER, SPAN_KIND_CLIENT
    said = {a.key: text(a.value) for a in server.attributes}
    assert server.name == f"chat {CLAUDE}"
    assert said["gen_ai.provider.name"] == "anthropic" and said["gen_ai.request.model"] == CLAUDE
    assert said["gen_ai.response.model"] == "claude-local-20261201"
    assert said["gen_ai.usage.input_tokens"] == 21 + 1800 + 300  # the cached ones included
    assert said["gen_ai.usage.cache_read.input_tokens"] == 1800
    assert said["gen_ai.usage.cache_creation.input_tokens"] == 300
    assert said["gen_ai.usage.output_tokens"] == 7  # message_delta's, after message_start's 1
    assert said["contextwarden.format"] == "anthropic" and said["contextwarden.stream"] is True
    assert said["contextwarden.tokens_before"] == said["contextwarden.tokens_after"] > 0
    assert said["contextwarden.window"] > 0 and said["contextwarden.team"] == "default"
    assert client.parent_span_id == server.span_id and client.trace_id == server.trace_id
    assert {a.key: text(a.value) for a in client.attributes}["contextwarden.attempt"] == 1
    names = {
        m.name
        for raw in received["/v1/metrics"]
        for r in ExportMetricsServiceRequest.FromString(raw).resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
    }
    assert {"contextwarden.requests", "contextwarden.proxy.overhead"} <= names
    assert "gen_ai.client.token.usage" in names


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({}, None, None),  # off unless set
        ({"OTEL_SERVICE_NAME": "x"}, None, None),  # naming the service asks for no export
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ("otlp",), ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",), ()),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",), ()),  # to the default endpoint
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"}, (), ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console,otlp", "OTEL_METRICS_EXPORTER": "none"},
         ("console", "otlp"), ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}, None, None),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, None, None),  # not installed: logged, left out
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
         None, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c",
          "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, ("otlp",), ()),
    ],
)  # fmt: skip
def test_the_variables_say_what_is_exported(
    env: dict[str, str], traces: tuple[str, ...] | None, metrics: tuple[str, ...] | None
) -> None:
    asked = otel.wanted(env)
    if traces is None:
        assert asked is None
    else:
        assert asked == otel.Wanted(traces, metrics or ())


def test_an_unsupported_protocol_is_said(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "contextwarden"):
        assert otel.start({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is None  # fmt: skip
    assert "only http/protobuf" in caplog.text


def test_variables_the_sdk_refuses_leave_it_off_and_say_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The proxy starts all the same: telemetry is not worth an outage."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "10")  # under the batch size (512)
    with caplog.at_level(logging.ERROR, "contextwarden"):
        assert otel.start() is None
    assert "max_export_batch_size" in caplog.text


WITHOUT_SDK = """
import logging, sys
class NoSdk:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, NoSdk())
logging.basicConfig(level=logging.WARNING, format="%(message)s")
import proxy.app
from proxy.observe import otel
assert otel.start({}) is None
assert otel.start({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}) is None
assert not [m for m in sys.modules if m.startswith("opentelemetry.sdk")], "imported"
print("ok")
"""


def test_without_the_sdk_the_proxy_runs_unchanged_and_says_why() -> None:
    """The otel extra not installed: asked for export, the proxy says how to get it and starts
    without it; nothing of the SDK is imported by the proxy's modules."""
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_SDK], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
    assert "pip install 'contextwarden[otel]'" in done.stderr


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        (  # chat: cached reads in prompt_tokens_details, included in prompt_tokens
            {"prompt_tokens": 900, "completion_tokens": 12,
             "prompt_tokens_details": {"cached_tokens": 768}},
            {"gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 12,
             "gen_ai.usage.cache_read.input_tokens": 768},
        ),
        (  # an Anthropic model through an OpenAI-compatible gateway (litellm's fields)
            {"prompt_tokens": 900, "completion_tokens": 12, "cache_read_input_tokens": 500,
             "cache_creation_input_tokens": 100},
            {"gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 12,
             "gen_ai.usage.cache_read.input_tokens": 500,
             "gen_ai.usage.cache_creation.input_tokens": 100},
        ),
        (  # Responses
            {"input_tokens": 900, "output_tokens": 30,
             "input_tokens_details": {"cached_tokens": 512}},
            {"gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 30,
             "gen_ai.usage.cache_read.input_tokens": 512},
        ),
        (  # Anthropic: input_tokens leaves the cached ones out
            {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 2000},
            {"gen_ai.usage.input_tokens": 2010, "gen_ai.usage.output_tokens": 5,
             "gen_ai.usage.cache_read.input_tokens": 0,
             "gen_ai.usage.cache_creation.input_tokens": 2000},
        ),
        ({"prompt_tokens": True, "completion_tokens": -1}, {}),  # no count: nothing said
    ],
)  # fmt: skip
def test_usage_in_every_format(usage: dict[str, Any], said: dict[str, int]) -> None:
    assert usage_attributes(usage) == said
    body = orjson.dumps({"model": "m-2026", "usage": usage})
    assert answered_body(body).attributes() == {"gen_ai.response.model": "m-2026", **said}


filler = st.integers(0, 3000)  # content deltas, to push usage past the kept head and tail


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    filler,
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.lists(st.integers(1, 4096), min_size=1, max_size=40),
)
def test_a_streams_usage_is_read_however_it_is_chunked(
    deltas: int, read: int, output: int, cuts: list[int]
) -> None:
    """Relayed in chunks of any sizes, a stream reaches the client unchanged and its span says
    the usage of its first and last events, however long the stream between them."""
    start = {"input_tokens": 3, "cache_read_input_tokens": read, "output_tokens": 1}
    events = [
        ("message_start", {"type": "message_start", "message": {"model": "c", "usage": start}}),
        *[("content_block_delta", {"type": "content_block_delta", "delta": {"text": "x" * 9}})]
        * deltas,
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": output}}),
    ]
    stream = sse(events)
    chunks, at = [], 0
    for size in cuts * (len(stream) // sum(cuts) + 1):
        if at >= len(stream):
            break
        chunks.append(stream[at : at + size])
        at += size
    exporter = InMemorySpanExporter()
    telemetry = build(span_exporter=exporter)

    async def relay() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def handler() -> Response:
        return StreamingResponse(relay(), media_type="text/event-stream")

    async def run() -> bytes:
        response = await telemetry.served("anthropic", handler)
        assert isinstance(response, StreamingResponse)
        return b"".join([c async for c in response.body_iterator])  # type: ignore[misc]

    assert asyncio.run(run()) == stream
    [span] = exporter.get_finished_spans()
    said = dict(span.attributes or {})
    assert said["gen_ai.usage.input_tokens"] == 3 + read
    assert said["gen_ai.usage.cache_read.input_tokens"] == read
    assert said["gen_ai.usage.output_tokens"] == output
    assert said["gen_ai.response.model"] == "c"
    telemetry.shutdown()


def spans_by_kind(exporter: InMemorySpanExporter) -> dict[SpanKind, list[Any]]:
    out: dict[SpanKind, list[Any]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.kind, []).append(span)
    return out


def test_a_shadow_request_has_its_attempt_its_provider_its_error_and_its_plan(
    tmp_path: Path,
) -> None:
    """Shadow mode (a policy's ``mode: shadow``) forwards the client's bytes: its span has the
    upstream attempt under it and the gen_ai attributes of an enforced request's; the upstream's
    400 overflow is an error on both; the plan made after the answer is a span of its own with
    ``contextwarden.shadow.*``."""
    spans = InMemorySpanExporter()
    with ExitStack() as stack:
        upstream = stack.enter_context(BackgroundServer(create_upstream(2048)))
        config = {
            "data_dir": str(tmp_path),
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "default_upstream": "demo",
            "models": {MODEL: {"context_window": 4096, "tokenizer": "o200k_base"}},
            "policies": {"default": {"mode": "shadow", "summarize": False}},
        }
        app = create_app(load_settings(None, **config), telemetry=build(span_exporter=spans))
        with BackgroundServer(app) as proxy:  # its shutdown drains the shadow plans
            body = {"model": MODEL, "messages": conversation(30)}
            got = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=60)
            assert got.status_code == 400, got.text  # the upstream's overflow, passed on
    found = spans_by_kind(spans)
    [server], [attempt] = found[SpanKind.SERVER], found[SpanKind.CLIENT]
    [plan] = found[SpanKind.INTERNAL]
    said, tried, planned = (dict(s.attributes or {}) for s in (server, attempt, plan))
    assert said["contextwarden.mode"] == "shadow" and said["contextwarden.actions"] == ("shadow",)
    assert said["gen_ai.provider.name"] == said["gen_ai.system"] == "openai"
    assert said["gen_ai.request.model"] == MODEL and server.name == f"chat {MODEL}"
    assert said["error.type"] == "400" and server.status.status_code == StatusCode.ERROR
    assert attempt.parent is not None and attempt.parent.span_id == server.context.span_id
    assert tried["gen_ai.provider.name"] == "openai" and tried["contextwarden.attempt"] == 1
    assert tried["http.response.status_code"] == 400 and tried["error.type"] == "400"
    assert attempt.status.status_code == StatusCode.ERROR
    assert plan.name == "contextwarden.shadow_plan" and plan.parent is not None
    assert plan.parent.span_id == server.context.span_id
    assert planned["contextwarden.mode"] == "shadow"
    assert planned["contextwarden.shadow.upstream_overflow"] is True
    assert planned["contextwarden.shadow.tokens_before"] > 2048  # over the upstream's window
    assert planned["contextwarden.shadow.tokens_saved"] == (
        planned["contextwarden.shadow.tokens_before"] - planned["contextwarden.shadow.tokens_after"]
    )


def test_any_answer_not_2xx_is_an_error_on_the_request_and_its_attempt(tmp_path: Path) -> None:
    """An enforced request the upstream refuses (429): ``error.type`` is the status, and both
    spans' status is ERROR (a refusal is a failure the trace must show)."""

    async def limited(request: Request) -> Response:
        await request.body()
        return Response(b'{"error": {"message": "slow down"}}', 429, media_type="application/json")

    spans = InMemorySpanExporter()
    limiter = Starlette(routes=[Route("/v1/chat/completions", limited, methods=["POST"])])
    with ExitStack() as stack:
        upstream = stack.enter_context(BackgroundServer(limiter))
        config = {
            "data_dir": str(tmp_path),
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "default_upstream": "demo",
            "models": {MODEL: {"context_window": 4096, "tokenizer": "o200k_base"}},
        }
        app = create_app(load_settings(None, **config), telemetry=build(span_exporter=spans))
        proxy = stack.enter_context(BackgroundServer(app))
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        got = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=30)
    assert got.status_code == 429
    found = spans_by_kind(spans)
    for span in (*found[SpanKind.SERVER], *found[SpanKind.CLIENT]):
        assert dict(span.attributes or {})["error.type"] == "429", span.name
        assert span.status.status_code == StatusCode.ERROR


def test_shutdown_with_the_collector_unreachable_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector that refuses every connection: the proxy that served a request stops within
    the bound (the SDK alone retried for 7 s a signal, traces then metrics), well inside the 5 s
    the Kubernetes manifests give background work."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    with ExitStack() as stack:
        upstream = stack.enter_context(BackgroundServer(create_upstream(100_000)))
        config = {
            "data_dir": str(tmp_path),
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "default_upstream": "demo",
            "models": {MODEL: {"context_window": 100_000, "tokenizer": "o200k_base"}},
        }
        proxy = BackgroundServer(create_app(load_settings(None, **config)))
        with proxy:
            body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
            got = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=30)
            assert got.status_code == 200, got.text
            began = time.monotonic()
        stopped = time.monotonic() - began
    assert stopped < SHUTDOWN_SECONDS + 1.0, stopped


def test_a_bad_number_is_said_in_one_line_and_its_default_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``OTEL_BSP_SCHEDULE_DELAY=xyz`` made the SDK log a traceback: each numeric variable is
    checked first, said in one line naming it, and the default handed to the SDK instead."""
    bad = {
        "OTEL_BSP_SCHEDULE_DELAY": "xyz",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1.5",
        "OTEL_METRIC_EXPORT_INTERVAL": "-1",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "soon",
    }
    for name, value in {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", **bad}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "4")
    with caplog.at_level(logging.INFO):
        telemetry = otel.start()
        assert telemetry is not None
        telemetry.shutdown(0.2)
    said = [r for r in caplog.records if r.name == "contextwarden" and "used instead" in r.message]
    assert sorted(r.message.split("=")[0] for r in said) == sorted(bad)
    assert "5000 ms used instead" in caplog.text and "60000 ms used instead" in caplog.text
    assert "4 s used instead" in caplog.text  # a signal's timeout falls back to the general one
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert "Unable to parse" not in caplog.text and "Found invalid" not in caplog.text
    assert otel_numbers.checked({"OTEL_EXPORTER_OTLP_TIMEOUT": "2.5"}) == {
        **otel_numbers.checked({}),
        "OTEL_EXPORTER_OTLP_TIMEOUT": 2.5,
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": 2.5,
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": 2.5,
    }
