"""``python -m bench.otel [--quick]``: the CPU OpenTelemetry adds to one request, against the
same request path with it off, in the same run (#56 item 3).

In process, one request's telemetry work is replayed: the request's span, one upstream
attempt's (a chat answer read whole, with usage and cache reads), the Outcome recorded into
Prometheus and, when on, onto the span and into the OTel metrics. Each figure is the process's
CPU time per request (the exporter's thread counted too: each run ends with a flush), the least
of 7 runs:

- off: no telemetry (``Runtime.telemetry is None``): Prometheus alone, the baseline;
- spans and metrics, not exported: what the request path itself does;
- exported: the SDK's batch processor and OTLP/HTTP exporters posting to a sink on loopback (a
  process of its own: ``--sink PORT``), its encoding counted;
- exported, 1 in 10 traces sampled (``OTEL_TRACES_SAMPLER=parentbased_traceidratio``).

The latency a real proxy adds is ``python -m bench``'s floor rows, run with the OTEL_*
variables set and not (docs/observability.md has both).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Sequence

import orjson
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from starlette.responses import Response

from proxy.config.catalog import Upstream
from proxy.observe.metrics import Metrics, Outcome
from proxy.observe.tracing import Telemetry, build
from proxy.request.planning.plan import Plan
from proxy.upstreams.forwarding import Reply
from strategies.budget import Budget

MODEL = "gpt-4o"
ANSWER = orjson.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok " * 50},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 5120,
            "completion_tokens": 50,
            "total_tokens": 5170,
            "prompt_tokens_details": {"cached_tokens": 4096},
        },
    }
)
UPSTREAM = Upstream(base_url="http://127.0.0.1:9/v1")


def outcome() -> Outcome:
    return Outcome(
        team="default",
        model=MODEL,
        status=200,
        tokens_before=9000,
        tokens_after=5120,
        actions=["truncate_oldest", "ledger"],
        retries=0,
        checkpoint=None,
        overhead=0.0004,
        upstream=0.002,
        stream=False,
        policy="default",
        prefix="kept",
        cached_tokens=4096,
    )


async def one(telemetry: Telemetry | None, metrics: Metrics) -> Response:
    """One request's telemetry, as proxy/edge/traced.py and exchange.py call it."""
    plan = Plan(
        body=b"{}",
        budget=Budget(window=8192, reserve=1024, tools=0, margin=64),
        tokens_before=9000,
        tokens_after=5120,
        actions=["truncate_oldest", "ledger"],
    )

    async def send(sent: Plan) -> Reply:
        return Reply(status=200, headers=[("content-type", "application/json")], body=ANSWER)

    async def handler() -> Response:
        if telemetry is None:
            reply = await send(plan)
        else:
            traced, judged = telemetry.attempts(send, MODEL, "chat", UPSTREAM)
            reply = await traced(plan)
            judged(reply, None)
        metrics.record(outcome())
        assert reply.body is not None
        return Response(reply.body, 200)

    if telemetry is None:
        return await handler()
    return await telemetry.served("chat", handler)


def per_request(telemetry: Telemetry | None, n: int) -> float:
    """CPU microseconds per request, the least of 7 runs of ``n``."""
    metrics = Metrics([MODEL])
    if telemetry is not None:
        telemetry.beside(metrics)

    async def run() -> float:
        started = time.process_time()
        for _ in range(n):
            await one(telemetry, metrics)
        if telemetry is not None:  # the exporter's work for these requests, counted
            telemetry.flush()
        return (time.process_time() - started) / n

    return min(asyncio.run(run()) for _ in range(7)) * 1e6


class Sink(SpanExporter):
    """A null span exporter: the spans are made and handed over, never encoded."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:  # vulture: the SDK's
        return SpanExportResult.SUCCESS


def exported(port: int, n: int, **env: str) -> float:
    """Per request, exporting over OTLP/HTTP to the sink at ``port`` (``env``: more variables)."""
    saved = dict(os.environ)
    # A queue that holds every span of a run: none dropped, each one's encoding counted.
    queue = {"OTEL_BSP_MAX_QUEUE_SIZE": str(max(4 * n, 2048))}
    os.environ.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", **queue, **env})
    try:
        telemetry = build(("otlp",), ("otlp",))
        try:
            return per_request(telemetry, n)
        finally:
            telemetry.shutdown()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def serve_sink(port: int) -> None:
    """An OTLP/HTTP collector that answers 200 to every export and keeps nothing."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.routing import Route

    async def export(request: Request) -> Response:
        await request.body()
        return Response(b"", 200, media_type="application/x-protobuf")

    routes = [Route(p, export, methods=["POST"]) for p in ("/v1/traces", "/v1/metrics")]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


def rows(n: int) -> list[tuple[str, float]]:
    from bench.__main__ import free_port, wait_port

    off = per_request(None, n)
    out = [("off (Prometheus alone)", off)]
    made = build(span_exporter=Sink(), metric_reader=InMemoryMetricReader())  # never collected
    out.append(("spans and metrics, not exported", per_request(made, n)))
    port = free_port()
    collector = subprocess.Popen([sys.executable, "-m", "bench.otel", "--sink", str(port)])
    try:
        wait_port(port, collector)
        out.append(("exported over OTLP/HTTP (encoding counted)", exported(port, n)))
        sampled = {
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.1",
        }
        out.append(("exported, 1 trace in 10 sampled", exported(port, n, **sampled)))
    finally:
        collector.terminate()
        collector.wait(timeout=10)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.otel")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--sink", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sink:
        serve_sink(args.sink)
        return 0
    measured = rows(50 if args.quick else 3000)
    off = measured[0][1]
    print("| telemetry | CPU per request | added |")
    print("|---|---|---|")
    for label, us in measured:
        print(f"| {label} | {us:.0f} us | +{us - off:.0f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
