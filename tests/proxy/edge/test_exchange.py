"""The request path's stages (proxy/edge/exchange.py), each driven on its own: a real runtime
over a fake transport (answers queued per request, every request kept), no server."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.datastructures import Headers
from starlette.requests import Request

from proxy.app import create_app
from proxy.config.catalog import Upstream
from proxy.config.settings import load_settings
from proxy.edge import exchange
from proxy.edge.auth import Principal
from proxy.edge.exchange import (
    Asked,
    Continuing,
    Intaking,
    Planned,
    Recording,
    Sending,
    UpstreamClock,
    answered_by_compaction,
    builder,
    handle,
    make_plan,
    read_in,
    record,
    refused,
    send_with_retry,
    serve_compaction,
    take_in,
)
from proxy.errors import BadRequest, ContextTooLarge, Invariant
from proxy.formats.chat import CHAT
from proxy.formats.responses import RESPONSES
from proxy.observe.outcome import Outcome
from proxy.overflow.relearning import Planning
from proxy.request.context_compaction import Summaries
from proxy.request.lessons import Teachers
from proxy.runtime import Runtime
from proxy.upstreams.forwarding import Reply
from proxy.wire import WireRequest

JSON = [("content-type", "application/json")]
ANSWER = {"id": "c1", "object": "chat.completion", "usage": {"prompt_tokens": 30},
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}  # fmt: skip
OVERFLOW = {"error": {"code": "context_length_exceeded", "type": "invalid_request_error",
                      "message": "This model's maximum context length is 1200 tokens. However, "
                                 "your messages resulted in 1700 tokens."}}  # fmt: skip


class FakeTransport:
    """The upstream: each request kept, answered by the next of ``replies``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.sent: list[dict[str, Any]] = []

    async def send(
        self,
        upstream: Upstream,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
        timeout: float | None = None,
    ) -> Reply:
        assert isinstance(content, bytes)
        self.sent.append(orjson.loads(content))
        return self.replies.pop(0)

    async def aclose(self) -> None:
        pass


class Stack:
    """A runtime, its fake upstream, and the outcomes it records."""

    def __init__(self, rt: Runtime, transport: FakeTransport) -> None:
        self.rt, self.upstream = rt, transport
        self.outcomes: list[Outcome] = []
        rt.metrics.record = lambda o, content=None: self.outcomes.append(o)  # type: ignore[method-assign]
        self.who = Principal(
            team="default", config=rt.settings.teams["default"], forward_client_auth=False
        )
        # What handle unpacks the runtime into, for each stage (the settings use no keys).
        self.intaking = Intaking(
            settings=rt.settings, models=rt.models, admission=rt.admission, items=rt.items,
            pins=rt.pins, owners=None, discovery=rt.windows.discovery,
        )  # fmt: skip
        self.planning = Planning(
            planner=rt.planner, models=rt.models, trimming=rt.settings.trimming
        )
        reserve = rt.settings.trimming.reserve_output_tokens
        self.summaries = Summaries(
            compactor=rt.compactor, planner=rt.planner, reserve_output_tokens=reserve
        )
        teachers = Teachers(
            windows=rt.windows, models=rt.models, usages=rt.usages, metrics=rt.metrics
        )
        build = builder(self.intaking, self.who, Headers(), CHAT, None)
        self.continuing = Continuing(planning=self.planning, teachers=teachers, build=build)
        self.recording = Recording(
            metrics=rt.metrics, owners=None, prefixes=rt.prefixes, settle=rt.settle,
            told=rt.told, log_content=False,
        )  # fmt: skip

    def sending(self, request: Request, clock: UpstreamClock) -> Sending:
        return Sending(request=request, who=self.who, clock=clock,
                       transports=self.rt.transports, telemetry=None)  # fmt: skip

    async def plan(self, req: WireRequest, body: bytes) -> Planned:
        build = builder(self.intaking, self.who, Headers(), req.fmt, self.rt.items)
        return await make_plan(self.planning, req, body, build)

    def request(self, body: bytes = b"", path: str = "/v1/chat/completions") -> Request:
        headers = [(b"content-type", b"application/json")]
        scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
                 "headers": headers, "query_string": b""}  # fmt: skip
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return Request(scope, receive)

    async def made(self, body: bytes, fmt: Any = CHAT) -> WireRequest:
        intake = await read_in(self.intaking, fmt, self.who, body, Headers())
        req = await take_in(self.intaking, intake, self.who, Headers())
        assert req is not None
        return req


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            None,
            data_dir=data,
            upstreams={"u": {"base_url": "http://u.test/v1", "apis": ["chat_completions",
                                                                     "responses"]}},
            models={
                "small": {"context_window": 4000, "tokenizer": "o200k_base"},
                "big": {"context_window": 100_000, "tokenizer": "o200k_base"},
            },
            policies={"default": {"summarize": False, "fallbacks": ["big"]}},
            teams={"default": {}, "watcher": {"mode": "shadow"}},
        )  # fmt: skip
        transport = FakeTransport()
        rt = await Runtime.start(settings, transport)
        try:
            yield Stack(rt, transport)
        finally:
            await rt.stop()


def chat(words: int, turns: int = 1, model: str = "small", last: int = 1) -> bytes:
    messages: list[dict[str, str]] = [{"role": "system", "content": "be brief"}]
    for i in range(turns):
        messages += [{"role": "user", "content": f"q{i} " + "word " * words},
                     {"role": "assistant", "content": "a"}]  # fmt: skip
    messages.append({"role": "user", "content": "last " * last})
    return orjson.dumps({"model": model, "messages": messages})


def ok() -> Reply:
    return Reply(status=200, headers=JSON, body=orjson.dumps(ANSWER))


async def test_intake_reads_then_makes_the_request_or_leaves_a_shadow_one_unmade(
    stack: Stack,
) -> None:
    intake = await read_in(stack.intaking, CHAT, stack.who, chat(10), Headers())
    assert intake.spec.name == "small" and intake.fmt is CHAT
    req = await take_in(stack.intaking, intake, stack.who, Headers())
    assert req is not None and req.window == 4000 and len(req.view.messages) == 4
    watcher = Principal(
        team="watcher", config=stack.rt.settings.teams["watcher"], forward_client_auth=False
    )
    shadow = await read_in(stack.intaking, CHAT, watcher, chat(10), Headers())
    assert await take_in(stack.intaking, shadow, watcher, Headers()) is None
    with pytest.raises(BadRequest):
        await read_in(stack.intaking, CHAT, stack.who, b'{"model": "small"}', Headers())


async def test_a_compaction_trigger_is_answered_unplanned(stack: Stack) -> None:
    trigger = {"model": "small", "input": [{"role": "user", "content": "hi"},
                                           {"type": "compaction_trigger"}]}  # fmt: skip
    assert answered_by_compaction(await stack.made(orjson.dumps(trigger), RESPONSES))
    assert not answered_by_compaction(await stack.made(chat(10)))


async def test_the_plan_stage_hands_on_the_fallback_that_fits(stack: Stack) -> None:
    body = chat(10, last=5000)  # its newest message alone is over small's window
    planned = await stack.plan(await stack.made(body), body)
    assert planned.req.spec.name == "big" and planned.plan.actions == ["fallback small->big"]
    assert planned.fitting.conversation and not planned.trial
    fits = await stack.plan(await stack.made(chat(10)), chat(10))
    assert fits.req.spec.name == "small" and fits.plan.actions == []


async def test_the_plan_stage_refuses_what_nothing_holds(stack: Stack) -> None:
    stack.rt.settings.policies["default"].fallbacks = []
    body = chat(10, last=5000)
    req = await stack.made(body)
    with pytest.raises(ContextTooLarge):
        await stack.plan(req, body)


async def test_no_compaction_asked_none_served(stack: Stack) -> None:
    served = await serve_compaction(stack.summaries, await stack.made(chat(10)))
    assert served.alone is None and served.carried is None


async def test_send_with_retry_shrinks_after_an_overflow_and_learns_the_window(
    stack: Stack,
) -> None:
    body = chat(100, turns=15)  # about 1,600 tokens: fits 4,000, not the 1,200 it will state
    req = await stack.made(body)
    planned = await stack.plan(req, body)
    assert planned.plan.actions == []
    stack.upstream.replies = [Reply(status=400, headers=JSON, body=orjson.dumps(OVERFLOW)), ok()]
    clock = UpstreamClock()
    sent = await send_with_retry(
        stack.sending(stack.request(body), clock), stack.continuing, planned
    )
    assert sent.reply.status == 200 and sent.retries == 1 and sent.recalled == 0
    assert "overflow-retry" in sent.plan.actions and sent.conversation
    first, second = stack.upstream.sent
    assert len(second["messages"]) < len(first["messages"]) == len(req.view.messages)
    assert stack.rt.models.learned.stated("default", "small") == 1200
    assert clock.seconds > 0 and clock.overhead() >= 0


async def test_record_says_what_was_done_and_counts_it(stack: Stack) -> None:
    body = chat(10, last=5000)
    planned = await stack.plan(await stack.made(body), body)
    stack.upstream.replies = [ok()]
    clock = UpstreamClock()
    sent = await send_with_retry(
        stack.sending(stack.request(body), clock), stack.continuing, planned
    )
    asked = Asked(team="default", model="small")
    sending = stack.sending(stack.request(body), clock)
    response = await record(stack.recording, sending, asked, sent, None)
    assert response.status_code == 200
    assert response.headers["x-contextwarden-model"] == "big"  # a fallback answered
    assert response.headers["x-contextwarden-actions"] == "fallback small->big"
    (outcome,) = stack.outcomes
    assert (outcome.team, outcome.model, outcome.status, outcome.retries) == (
        "default", "big", 200, 0,
    )  # fmt: skip
    assert outcome.actions == ["fallback small->big"] and outcome.format == "chat"


async def test_a_refusal_is_counted_with_what_was_known(stack: Stack) -> None:
    exc = ContextTooLarge("too large")
    exc.before = 5100
    asked = Asked(team="default", model="small", stream=True)
    refused(stack.rt.metrics, CHAT, asked, exc, UpstreamClock())
    (outcome,) = stack.outcomes
    assert (outcome.model, outcome.status, outcome.stream, outcome.actions) == (
        "small", 400, True, [],
    )  # fmt: skip
    said = dict(exc.headers)
    assert said["x-contextwarden-actions"] == "rejected"
    assert said["x-contextwarden-tokens-before"] == "5100"


async def test_handle_runs_the_stages_in_turn(stack: Stack) -> None:
    stack.upstream.replies = [ok()]
    body = chat(10)
    response = await handle(stack.request(body), stack.rt, CHAT)
    assert response.status_code == 200 and stack.upstream.sent == [orjson.loads(body)]
    (outcome,) = stack.outcomes
    assert outcome.model == "small" and outcome.actions == [] and outcome.status == 200
    with pytest.raises(BadRequest):
        await handle(stack.request(b'{"model": "small"}'), stack.rt, CHAT)
    assert stack.outcomes[-1].status == 400 and stack.outcomes[-1].model == "-"


def test_a_planned_value_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        Planned(None, None, None)  # type: ignore[call-arg, arg-type]


async def test_a_broken_invariant_is_a_plain_500_in_the_clients_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What an ``assert`` checked raises ``Invariant``, kept under ``python -O``: the client gets
    the top-level handler's 500, never a traceback."""

    async def broken(*args: Any) -> Any:
        raise Invariant("a plan that offers recall has a budget")

    monkeypatch.setattr(exchange, "make_plan", broken)
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            None,
            data_dir=data,
            upstreams={"u": {"base_url": "http://u.test/v1"}},
            models={"small": {"context_window": 4000, "tokenizer": "o200k_base"}},
        )
        app = create_app(settings, FakeTransport())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                response = await c.post("/v1/chat/completions", content=chat(10))
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "Traceback" not in response.text and "recall" not in response.text
