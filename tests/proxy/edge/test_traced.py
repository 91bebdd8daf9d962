"""One fitted request inside its OpenTelemetry span when telemetry is on (proxy/edge/traced.py):
``handle`` called as it is otherwise, its answer the client's either way, the span named by the
request's format."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.requests import Request
from starlette.responses import Response

import proxy.edge.traced as traced
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.chat import CHAT
from proxy.formats.responses import RESPONSES
from proxy.observe.tracing import build


class Handled:
    """``handle``, recording what it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def __call__(self, request: Request, rt: Any, fmt: Any) -> Response:
        self.calls.append((request, rt, fmt))
        return Response(f"answered {fmt.name}".encode(), status_code=201)


class Telemetry:
    """The tracer's ``served``: the request's work run inside a span named by its format."""

    def __init__(self) -> None:
        self.spans: list[str] = []

    async def served(self, name: str, work: Callable[[], Awaitable[Response]]) -> Response:
        self.spans.append(name)
        return await work()


@pytest.fixture
def handled(monkeypatch: pytest.MonkeyPatch) -> Handled:
    fake = Handled()
    monkeypatch.setattr(traced, "handle", fake)
    return fake


def request() -> Request:
    return Request({"type": "http", "method": "POST", "path": "/v1/chat/completions",
                    "headers": []})  # fmt: skip


async def test_without_telemetry_the_request_is_handled_as_it_came(handled: Handled) -> None:
    rt: Any = SimpleNamespace(telemetry=None)
    req = request()
    answer = await traced.fitted(req, rt, CHAT)
    assert handled.calls == [(req, rt, CHAT)]
    assert (answer.status_code, answer.body) == (201, b"answered chat")


@pytest.mark.parametrize("fmt", [CHAT, RESPONSES, ANTHROPIC], ids=lambda f: f.name)
async def test_with_telemetry_the_request_is_handled_inside_its_span(
    handled: Handled, fmt: Any
) -> None:
    telemetry = Telemetry()
    rt: Any = SimpleNamespace(telemetry=telemetry)
    req = request()
    answer = await traced.fitted(req, rt, fmt)
    assert telemetry.spans == [fmt.name]
    assert handled.calls == [(req, rt, fmt)]  # once, with the same arguments
    assert answer.body == f"answered {fmt.name}".encode()


async def test_an_error_in_the_handler_leaves_the_span_as_it_would_the_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The span sees the error (to record it) and the error reaches the error handler."""

    async def failing(request: Request, rt: Any, fmt: Any) -> Response:
        raise LookupError("broke")

    seen: list[BaseException] = []

    class Recording(Telemetry):
        async def served(self, name: str, work: Callable[[], Awaitable[Response]]) -> Response:
            try:
                return await work()
            except LookupError as exc:
                seen.append(exc)
                raise

    monkeypatch.setattr(traced, "handle", failing)
    rt: Any = SimpleNamespace(telemetry=Recording())
    with pytest.raises(LookupError):
        await traced.fitted(request(), rt, CHAT)
    assert len(seen) == 1
    rt.telemetry = None
    with pytest.raises(LookupError):
        await traced.fitted(request(), rt, CHAT)


async def test_the_real_tracer_makes_one_span_of_the_format_with_the_answers_status(
    handled: Handled,
) -> None:
    exporter = InMemorySpanExporter()
    telemetry = build(span_exporter=exporter)
    try:
        rt: Any = SimpleNamespace(telemetry=telemetry)
        answer = await traced.fitted(request(), rt, RESPONSES)
        assert answer.body == b"answered responses" and len(handled.calls) == 1
        [span] = exporter.get_finished_spans()
        assert dict(span.attributes or {})["contextwarden.format"] == RESPONSES.name
        assert dict(span.attributes or {})["http.response.status_code"] == 201
    finally:
        telemetry.shutdown()
