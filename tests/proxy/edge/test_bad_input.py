"""Bad input of every kind gets a clear OpenAI-style 4xx, never a 500; a fuzz test proves it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.proxy.upstreams.test_forwarding import BASE, OK, config_with, running


@pytest.fixture
async def client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    async with running(config_with(monkeypatch, limits={"max_body_bytes": 200_000})) as c:
        yield c


def assert_openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = orjson.loads(response.content)["error"]
    assert set(error) >= {"message", "type", "code"}
    assert isinstance(error["message"], str) and error["message"]
    return error  # type: ignore[no-any-return]


MSG = '{"role": "user", "content": "hi"}'

CASES = [
    (b"\xff\xfe{not utf-8", 400),
    (b"", 400),
    (b"null", 400),
    (b'"a string"', 400),
    (b"[" * 5000 + b"]" * 5000, 400),
    (b'{"model": "small", "messages": [' + b"[" * 3000 + b"]" * 3000 + b"]}", 400),
    (f'{{"model": 5, "messages": [{MSG}]}}'.encode(), 400),
    (f'{{"model": "small", "messages": [{MSG}], "max_tokens": -1}}'.encode(), 400),
    (f'{{"model": "small", "messages": [{MSG}], "max_tokens": true}}'.encode(), 400),
    (f'{{"model": "small", "messages": [{MSG}], "max_tokens": 1e400}}'.encode(), 400),
    (
        f'{{"model": "small", "messages": [{MSG}], "max_tokens": 99999999999999999999999}}'.encode(),
        400,
    ),
    (f'{{"model": "small", "messages": [{MSG}], "max_tokens": 1000000000}}'.encode(), 400),
    (f'{{"model": "small", "messages": [{MSG}], "stream": "yes"}}'.encode(), 400),
    (f'{{"model": "small", "messages": [{MSG}], "tools": {{"a": 1}}}}'.encode(), 400),
    (f'{{"model": "small", "messages": [{MSG}], "contextwarden": {{"bogus": 1}}}}'.encode(), 400),
    (
        f'{{"model": "small", "messages": [{MSG}], "contextwarden": {{"session_memory": 3}}}}'.encode(),
        400,
    ),
    (b'{"model": "small", "messages": [{"role": "user", "content": [{"text": "no type"}]}]}', 400),
    (b'{"model": "small", "messages": [{"role": "user", "content": [7]}]}', 400),
    (b'{"model": "small", "messages": [{"role": "tool", "content": "x"}]}', 400),
    (b'{"model": "small", "messages": [{"role": "assistant", "tool_calls": {"id": 1}}]}', 400),
    (b'{"model": "small", "messages": [{"role": "assistant", "tool_calls": [{"id": 1}]}]}', 400),
    (b'{"model": "small", "messages": [{"role": "overlord", "content": "x"}]}', 400),
    (b'{"model": "small", "messages": [' + b",".join([MSG.encode()] * 7000) + b"]}", 413),
]


@respx.mock
@pytest.mark.parametrize(("body", "status"), CASES)
async def test_bad_bodies_get_clear_errors(
    client: httpx.AsyncClient, body: bytes, status: int
) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    assert_openai_error(await client.post("/v1/chat/completions", content=body), status)
    assert not route.called


@respx.mock
async def test_unknown_content_part_types_pass_through(client: httpx.AsyncClient) -> None:
    """A part type the proxy does not know (a newer API feature) is the upstream's to judge."""
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    part = {"type": "input_hologram", "hologram": {"data": "AAAA"}}
    body = {"model": "small", "messages": [{"role": "user", "content": [part]}]}
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert orjson.loads(route.calls.last.request.content) == body


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
FIELDS = st.sampled_from(
    [
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "type",
        "text",
        "image_url",
        "function",
        "id",
    ]
)
ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "x"])


@st.composite
def messy_message(draw: st.DrawFn) -> Any:
    base: dict[str, Any] = {"role": draw(ROLES | JSON)}
    for key in draw(st.lists(FIELDS, max_size=4)):
        base[key] = draw(JSON | st.lists(st.dictionaries(FIELDS, JSON, max_size=3), max_size=3))
    return draw(st.just(base) | JSON)


@st.composite
def messy_body(draw: st.DrawFn) -> bytes:
    body: dict[str, Any] = {}
    if draw(st.booleans()):
        body["model"] = draw(st.sampled_from(["small", "unknown-model"]) | JSON)
    if draw(st.integers(0, 5)):
        body["messages"] = draw(st.lists(messy_message(), max_size=6) | JSON)
    for key in draw(
        st.lists(
            st.sampled_from(
                [
                    "max_tokens",
                    "max_completion_tokens",
                    "stream",
                    "tools",
                    "functions",
                    "contextwarden",
                    "n",
                ]
            ),
            max_size=3,
        )
    ):
        body[key] = draw(JSON)
    raw = orjson.dumps(body)
    if draw(st.integers(0, 9)) == 0:
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=8))
    return raw


WORDS = st.text(alphabet="abc xyz", min_size=0, max_size=400)


@st.composite
def near_valid_message(draw: st.DrawFn, i: int) -> dict[str, Any]:
    """A well-formed message with, now and then, one field of the wrong type at any depth:
    inside content parts, image_url, tool calls and their function, function_call."""
    wrong = draw(st.booleans()) and draw(st.integers(0, 3)) == 0

    def maybe(valid: Any) -> Any:
        return draw(JSON) if wrong and draw(st.booleans()) else valid

    kind = draw(st.sampled_from(["text", "parts", "call", "function_call"]))
    if kind == "parts":
        parts = [
            {"type": "text", "text": maybe(draw(WORDS))},
            {"type": "image_url", "image_url": maybe({"url": maybe("https://x/i.png"),
                                                        "detail": maybe("low")})},
        ]  # fmt: skip
        return {"role": "user", "content": maybe(parts)}
    if kind == "call":
        call = {"id": maybe(f"c{i}"), "type": "function",
                "function": maybe({"name": maybe("f"), "arguments": maybe('{"path": "a"}')})}  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": maybe([call])}
    if kind == "function_call":
        fc = maybe({"name": maybe("f"), "arguments": maybe("{}")})
        return {"role": "assistant", "content": None, "function_call": fc}
    return {"role": draw(st.sampled_from(["user", "assistant", "tool"])), "content": draw(WORDS),
            "tool_call_id": maybe(f"c{i}"), "name": maybe("n")}  # fmt: skip


@st.composite
def near_valid_body(draw: st.DrawFn) -> bytes:
    """Long enough, often, that the engine trims it: the wrong type must be a 400, never a 500
    from somewhere deep in counting or trimming."""
    n = draw(st.integers(1, 30))
    messages = [draw(near_valid_message(i)) for i in range(n)]
    body: dict[str, Any] = {"model": "small", "messages": messages, "max_tokens": 50}
    if draw(st.booleans()):
        fn = draw(JSON) if draw(st.booleans()) else {"name": "f", "parameters": draw(JSON)}
        body["tools"] = [{"type": "function", "function": fn}]
    return orjson.dumps(body)


@pytest.mark.slow
@respx.mock
def test_fuzzed_bodies_never_get_a_5xx(monkeypatch: pytest.MonkeyPatch) -> None:
    """One app for every example (starting one per example would dominate the run)."""
    respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    loop = asyncio.new_event_loop()
    app = running(config_with(monkeypatch))
    client = loop.run_until_complete(app.__aenter__())

    @settings(
        max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(body=messy_body() | near_valid_body())
    def post(body: bytes) -> None:
        response = loop.run_until_complete(client.post("/v1/chat/completions", content=body))
        assert response.status_code < 500, (body, response.text)
        if response.status_code >= 400:
            assert_openai_error(response, response.status_code)

    try:
        post()
    finally:
        loop.run_until_complete(app.__aexit__(None, None, None))
        loop.close()


@pytest.mark.parametrize(
    ("method", "path", "status", "shape"),
    [
        ("GET", "/nope", 404, "openai"),
        ("POST", "/v2/chat/completions", 404, "openai"),
        ("GET", "/chat/completions", 405, "openai"),
        ("DELETE", "/admin/stats", 405, "openai"),
        ("GET", "/messages", 405, "anthropic"),
    ],
)
async def test_a_path_or_method_the_proxy_does_not_serve_gets_the_clients_error(
    client: httpx.AsyncClient, method: str, path: str, status: int, shape: str
) -> None:
    """Starlette's own answers are plain text; the client reads its provider's JSON instead
    (a path under /v1/ the proxy does not fit is the upstream's to answer)."""
    response = await client.request(method, path)
    assert response.headers["content-type"] == "application/json"
    words = f"({method} {path})"
    if shape == "anthropic":
        body = orjson.loads(response.content)
        assert response.status_code == status and body["type"] == "error"
        assert words in body["error"]["message"]
    else:
        assert words in assert_openai_error(response, status)["message"]
    if status == 405:
        assert "allow" in response.headers


async def test_an_anthropic_client_on_no_route_gets_anthropics_shape(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/nope", headers={"anthropic-version": "2023-06-01"})
    body = orjson.loads(response.content)
    assert response.status_code == 404 and body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
