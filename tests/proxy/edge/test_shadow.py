"""Shadow mode's own promises (proxy/edge/shadow.py), in-process against a respx upstream:
whether a request runs in shadow mode (its team's mode, else its policy's; never a compaction
the proxy serves), the request sent as it came and its answer relayed byte for byte, an
overflow passed on without a retry, and the plan made after the answer, counted apart; a plan
that fails is counted and never reaches the client. The whole conversations, against a real
upstream, are tests/e2e/test_shadow.py's."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
import respx
from starlette.applications import Starlette
from starlette.datastructures import Headers

import proxy.edge.shadow as shadow_module
from proxy.app import create_app
from proxy.config.settings import Settings, load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import read_request
from proxy.edge.shadow import SHADOW, Answered, after, shadowed
from proxy.observe.metrics import Metrics
from proxy.runtime import Runtime
from proxy.windows.models import build_models
from tests.respx_transport import HttpxTransport

BASE = "http://upstream.test/v1"
OK = b'{"id":"c1",  "object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}'
TEAMS = {"enforced": {"mode": "enforce"}, "shadow": {"mode": "shadow"}, "by_policy": {}}


def config(**extra: Any) -> dict[str, Any]:
    return {
        "upstreams": {"demo": {"base_url": BASE}},
        "models": {"small": {"context_window": 600, "tokenizer": "o200k_base"}},
        "policies": {
            "default": {"summarize": False},
            "watched": {"mode": "shadow", "summarize": False},
        },
        "teams": {**TEAMS, "by_policy": {"policy": "watched"}},
        **extra,
    }


def chat(turns: int, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(turns):
        messages += [
            {"role": "user", "content": f"q{i} " + "word " * 40},
            {"role": "assistant", "content": "a " * 40},
        ]
    messages.append({"role": "user", "content": "last"})
    return {"model": "small", "messages": messages, "max_tokens": 50, **extra}


@asynccontextmanager
async def serving(**extra: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    with tempfile.TemporaryDirectory() as data:
        app: Starlette = create_app(load_settings(None, data_dir=data, **config(**extra)),
                                    HttpxTransport())  # fmt: skip
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                yield c, app.state.runtime


async def post(client: httpx.AsyncClient, body: bytes, team: str) -> httpx.Response:
    headers = {"content-type": "application/json", "x-contextwarden-team": team}
    return await client.post("/v1/chat/completions", content=body, headers=headers)


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(None, **config())


def test_a_teams_mode_comes_first_then_its_policys(settings: Settings) -> None:
    models = build_models(settings)
    body = orjson.dumps(chat(1))
    for team, expected in [("shadow", True), ("enforced", False), ("by_policy", True)]:
        who = Principal(team=team, config=settings.teams[team], forward_client_auth=True)
        intake = read_request(body, Headers({}), settings, models, who)
        assert shadowed(models, intake, who) is expected, team
    # A team that enforces a shadow policy enforces it.
    who = Principal(team="enforced", config=settings.teams["enforced"], forward_client_auth=True)
    watched = orjson.dumps(chat(1, contextwarden={"policy": "watched"}))
    free = settings.teams["enforced"].model_copy(update={"allowed_policies": ["watched"]})
    intake = read_request(
        watched,
        Headers({}),
        settings,
        models,
        Principal(team="enforced", config=free, forward_client_auth=True),
    )
    assert intake.policy == "watched" and not shadowed(models, intake, who)


def test_a_compaction_the_proxy_serves_is_never_shadowed(settings: Settings) -> None:
    models = build_models(settings)
    who = Principal(team="shadow", config=settings.teams["shadow"], forward_client_auth=True)
    intake = read_request(orjson.dumps(chat(1)), Headers({}), settings, models, who)
    intake.compaction = object()  # type: ignore[assignment]
    assert not shadowed(models, intake, who)


@respx.mock
async def test_the_request_goes_as_sent_and_the_answer_comes_back_byte_for_byte() -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, content=OK, headers={"content-type": "application/json"})
    )
    body = orjson.dumps(chat(12, temperature=0.25))  # far over the window of 600
    async with serving() as (client, rt):
        answer = await post(client, body, "shadow")
        assert answer.status_code == 200 and answer.content == OK
        assert answer.headers["x-contextwarden-actions"] == SHADOW
        assert route.calls.last.request.content == body  # no trimming in shadow mode
        await rt.shadows.drain()
        stats = rt.metrics.shadow.teams["shadow"]
        assert stats.requests == 1 and stats.would_trim == 1 and stats.plan_errors == 0
        assert stats.tokens_after < stats.tokens_before
        assert rt.metrics.teams["shadow"].requests == 1  # counted as a forwarded request


@respx.mock
async def test_controls_are_taken_out_and_the_rest_is_left_as_it_came() -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, content=OK)
    )
    sent = chat(1, contextwarden={"trim": True})
    async with serving() as (client, rt):
        await post(client, orjson.dumps(sent), "shadow")
        await rt.shadows.drain()
    del sent["contextwarden"]
    assert orjson.loads(route.calls.last.request.content) == sent


@respx.mock
async def test_an_upstream_overflow_is_passed_on_once_and_counted() -> None:
    refusal = orjson.dumps(
        {"error": {"message": "This model's maximum context length is 500 tokens. However, "
                   "your messages resulted in 900 tokens.", "type": "invalid_request_error",
                   "code": "context_length_exceeded"}}
    )  # fmt: skip
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(400, content=refusal)
    )
    async with serving() as (client, rt):
        answer = await post(client, orjson.dumps(chat(3)), "shadow")
        await rt.shadows.drain()
        assert answer.status_code == 400 and answer.content == refusal
        assert route.call_count == 1  # no retry
        assert rt.metrics.shadow.teams["shadow"].upstream_overflows == 1


@respx.mock
async def test_a_failing_plan_is_counted_and_the_client_has_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, content=OK))

    def broken(*args: Any) -> Any:
        raise RuntimeError("planner broke")

    monkeypatch.setattr(shadow_module, "fitting_for", broken)
    async with serving() as (client, rt):
        answer = await post(client, orjson.dumps(chat(3)), "shadow")
        await rt.shadows.drain()
        assert answer.status_code == 200 and answer.content == OK
        assert rt.metrics.shadow.teams["shadow"].plan_errors == 1


async def test_after_counts_a_request_it_could_not_make_and_never_raises(
    settings: Settings,
) -> None:
    metrics = Metrics(settings.models)
    shadowing: Any = SimpleNamespace(metrics=metrics)  # all a failed making uses

    async def unmade() -> Any:
        raise ValueError("the view could not be made")

    answered = Answered(team="shadow", status=200, refused=None, outcome=None)
    await after(shadowing, unmade, answered)
    assert metrics.shadow.teams["shadow"].plan_errors == 1
    assert "shadow" not in metrics.teams  # its outcome was counted on the request's path
