"""``POST /v1/messages`` through the proxy, in process: bad input gets Anthropic's error shape
(never a 5xx), a fitting request goes as its bytes, ``count_tokens`` is forwarded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import respx

from tests.proxy.upstreams.test_forwarding import BASE, config_with, running

OK = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {}}
USER = {"role": "user", "content": "hi"}
USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "R", "input": {}}],
}
RESULT = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
}


@pytest.fixture
async def client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    config = config_with(
        monkeypatch,
        upstreams={
            "claude": {
                "provider": "anthropic",
                "base_url": BASE,
                "api_key_env": "DEMO_UPSTREAM_KEY",
            }
        },
        default_upstream="claude",
        models={"claude-x": {"context_window": 600, "tokenizer": "estimate"}},
    )
    async with running(config) as c:
        yield c


def assert_anthropic_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = orjson.loads(response.content)
    assert body["type"] == "error"
    assert isinstance(body["error"]["type"], str) and body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


def body(**fields: Any) -> bytes:
    return orjson.dumps({"model": "claude-x", "max_tokens": 64, **fields})


CASES = [
    b"not json",
    body(),
    body(messages=[]),
    body(messages="hi"),
    body(messages=[7]),
    body(messages=[{"content": "x"}]),  # no role at all (a system role goes upstream)
    body(messages=[{"role": "user", "content": 5}]),
    body(messages=[{"role": "user", "content": [{"text": "no type"}]}]),
    body(messages=[USER, USE]),
    body(messages=[USER, USE, USER]),
    body(messages=[USER, RESULT]),
    body(
        messages=[
            USER,
            {"role": "assistant", "content": [{"type": "tool_use", "name": "R"}]},
            RESULT,
        ]
    ),
    body(messages=[USER], system=5),
    body(messages=[USER], stream="yes"),
    body(messages=[USER], tools={"a": 1}),
    orjson.dumps({"model": "claude-x", "messages": [USER]}),
    orjson.dumps({"model": "claude-x", "max_tokens": 0, "messages": [USER]}),
    orjson.dumps({"max_tokens": 5, "messages": [USER]}),
]


@respx.mock
@pytest.mark.parametrize("raw", CASES)
async def test_bad_messages_bodies_get_anthropic_errors(
    client: httpx.AsyncClient, raw: bytes
) -> None:
    route = respx.post(f"{BASE}/messages").mock(return_value=httpx.Response(200, json=OK))
    error = assert_anthropic_error(await client.post("/v1/messages", content=raw), 400)
    assert error["type"] == "invalid_request_error"
    assert not route.called


@respx.mock
async def test_a_fitting_request_goes_as_its_bytes_with_the_operators_key_in_x_api_key(
    client: httpx.AsyncClient,
) -> None:
    route = respx.post(f"{BASE}/messages").mock(return_value=httpx.Response(200, json=OK))
    raw = b'{"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "future": 1.50}'
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "a,b"}
    response = await client.post("/v1/messages", content=raw, headers=headers)
    assert response.status_code == 200
    sent = route.calls.last.request
    assert sent.content == raw
    assert sent.headers["x-api-key"] == "sk-upstream-secret"
    assert "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["anthropic-beta"] == "a,b"


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"content": "x"}, "messages.0.role: Field required"),
        ({"role": 7, "content": "x"}, "messages.0.role: must be a non-empty string (got int)"),
        ({"role": "", "content": "x"}, "messages.0.role: must be a non-empty string (got empty)"),
    ],
)
async def test_a_bad_role_is_named_for_what_it_is(
    client: httpx.AsyncClient, message: dict[str, Any], said: str
) -> None:
    """A role of the wrong type was reported missing ("Field required")."""
    raw = body(messages=[message])
    error = assert_anthropic_error(await client.post("/v1/messages", content=raw), 400)
    assert error["message"] == said


@respx.mock
async def test_count_tokens_is_forwarded(client: httpx.AsyncClient) -> None:
    route = respx.post(f"{BASE}/messages/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 7})
    )
    raw = body(messages=[USER])
    response = await client.post("/v1/messages/count_tokens", content=raw)
    assert response.json() == {"input_tokens": 7}
    assert route.calls.last.request.content == raw


@respx.mock
async def test_an_unreachable_upstream_is_an_api_error_in_anthropics_shape(
    client: httpx.AsyncClient,
) -> None:
    respx.post(f"{BASE}/messages").mock(side_effect=httpx.ConnectError("refused"))
    response = await client.post("/v1/messages", content=body(messages=[USER]))
    assert assert_anthropic_error(response, 502)["type"] == "api_error"


async def test_a_missing_key_is_an_authentication_error_in_anthropics_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEAM_KEY", "cw-team")
    config = config_with(monkeypatch, auth="keys", teams={"default": {"key_envs": ["TEAM_KEY"]}})
    async with running(config) as c:
        response = await c.post("/v1/messages", content=body(messages=[USER]))
    assert assert_anthropic_error(response, 401)["type"] == "authentication_error"


@respx.mock
async def test_an_answer_stopped_at_the_window_is_counted_and_left_alone(
    client: httpx.AsyncClient,
) -> None:
    stopped = {**OK, "stop_reason": "model_context_window_exceeded"}
    respx.post(f"{BASE}/messages").mock(return_value=httpx.Response(200, json=stopped))
    response = await client.post("/v1/messages", content=body(messages=[USER]))
    assert response.json() == stopped
    assert response.headers["x-contextwarden-retries"] == "0"
    metrics = (await client.get("/metrics")).text
    assert (
        'contextwarden_context_window_stops_total{model="claude-x",team="default"} 1.0' in metrics
    )
