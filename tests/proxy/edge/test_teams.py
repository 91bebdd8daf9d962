"""Teams from config alone: auth, models, caps, policies, overrides, metrics, logs, admin."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import respx

from tests.proxy.upstreams.test_forwarding import BASE, OK, running

SEARCH_KEY = "cw-search-key-0123456789"
CHAT_KEY = "cw-chat-key-9876543210"
ADMIN_KEY = "cw-admin-key-abcdef"
UPSTREAM_KEY = "sk-upstream-secret-key"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCH_TEAM_KEY", SEARCH_KEY)
    monkeypatch.setenv("CHAT_TEAM_KEY", CHAT_KEY)
    monkeypatch.setenv("CW_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("UPSTREAM_KEY", UPSTREAM_KEY)


def config(**extra: Any) -> dict[str, Any]:
    return {
        "upstreams": {"demo": {"base_url": BASE, "api_key_env": "UPSTREAM_KEY"}},
        "default_upstream": "demo",
        "models": {
            "gpt-4o": {"context_window": 8000, "tokenizer": "o200k_base"},
            "gpt-4o-mini": {"context_window": 8000, "tokenizer": "o200k_base"},
        },
        "auth": "keys",
        "admin_key_env": "CW_ADMIN_KEY",
        "teams": {
            "search": {
                "key_envs": ["SEARCH_TEAM_KEY"],
                "policy": "rag",
                "models": ["gpt-4o-mini"],
                "max_context_tokens": 1500,
                "reserve_output_tokens": 200,
            },
            "chat": {
                "key_envs": ["CHAT_TEAM_KEY"],
                "allowed_policies": ["middle"],
                "allow_disable_trimming": True,
            },
        },
        "policies": {
            "default": {"summarize": False},
            "rag": {"extends": "default", "cache_cut_share": 0},
            "middle": {"extends": "default", "history": {"strategy": "middle_out"}},
        },
        **extra,
    }


@pytest.fixture
async def client(keys: None) -> AsyncIterator[httpx.AsyncClient]:
    async with running(config()) as c:
        yield c


def chat_body(model: str = "gpt-4o-mini", turns: int = 40, **extra: Any) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(turns):
        msgs += [
            {"role": "user", "content": f"q{i} " + "word " * 30},
            {"role": "assistant", "content": f"a{i} " + "ok " * 30},
        ]
    msgs.append({"role": "user", "content": "final question"})
    return {"model": model, "messages": msgs, **extra}


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@respx.mock
@pytest.mark.parametrize(
    ("headers", "model", "status", "code"),
    [
        ({}, "gpt-4o-mini", 401, "invalid_api_key"),
        (auth("cw-wrong-key"), "gpt-4o-mini", 401, "invalid_api_key"),
        (auth(UPSTREAM_KEY), "gpt-4o-mini", 401, "invalid_api_key"),
        (auth(SEARCH_KEY), "gpt-4o", 403, "model_not_allowed"),
        (auth(SEARCH_KEY), "gpt-4o-mini", 200, None),
        (auth(CHAT_KEY), "gpt-4o", 200, None),
    ],
    ids=["missing", "unknown", "upstream-key", "wrong-model", "allowed", "other-team"],
)
async def test_keys_mode_auth_table(
    client: httpx.AsyncClient, headers: dict[str, str], model: str, status: int, code: str | None
) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    response = await client.post("/v1/chat/completions", json=chat_body(model, 1), headers=headers)
    assert response.status_code == status
    for secret in (SEARCH_KEY, CHAT_KEY, UPSTREAM_KEY, "cw-wrong-key"):
        assert secret not in response.text  # error bodies never echo a key
    if code:
        assert response.json()["error"]["code"] == code
        assert not route.called
    else:
        sent = route.calls.last.request
        assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the team key stays here


@respx.mock
async def test_passthrough_sends_the_clients_key_and_picks_the_team_by_header(keys: None) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    cfg = config(auth="passthrough")
    cfg["upstreams"]["demo"].pop("api_key_env")
    async with running(cfg) as c:
        ok = await c.post(
            "/v1/chat/completions",
            json=chat_body(),
            headers={**auth("sk-client-own"), "x-contextwarden-team": "search"},
        )
        denied = await c.post(
            "/v1/chat/completions",
            json=chat_body("gpt-4o"),
            headers={"x-contextwarden-team": "search"},
        )
        unknown = await c.post(
            "/v1/chat/completions", json=chat_body(), headers={"x-contextwarden-team": "nope"}
        )
        default = await c.post(
            "/v1/chat/completions", json=chat_body("gpt-4o", 1), headers=auth("sk-client-own")
        )
    assert ok.status_code == 200 and default.status_code == 200
    assert route.calls[0].request.headers["authorization"] == "Bearer sk-client-own"
    assert "x-contextwarden-team" not in route.calls[0].request.headers
    assert denied.status_code == 403
    assert unknown.status_code == 401


@respx.mock
async def test_team_caps_and_policies_change_what_is_forwarded(client: httpx.AsyncClient) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    search = await client.post(
        "/v1/chat/completions", json=chat_body("gpt-4o-mini"), headers=auth(SEARCH_KEY)
    )
    chat = await client.post(
        "/v1/chat/completions", json=chat_body("gpt-4o-mini"), headers=auth(CHAT_KEY)
    )
    assert (
        int(search.headers["x-contextwarden-budget"]) == 1500 - 200 - 16
    )  # team window and reserve
    assert (
        int(chat.headers["x-contextwarden-budget"]) == 8000 - 2000 - 16
    )  # window/4 default reserve
    small, large = (orjson.loads(c.request.content)["messages"] for c in route.calls)
    assert len(small) < len(large)
    assert int(search.headers["x-contextwarden-tokens-after"]) <= 1500 - 200 - 16


@respx.mock
async def test_per_request_overrides_only_where_the_team_allows(client: httpx.AsyncClient) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    body = chat_body("gpt-4o", 150)
    chosen = await client.post(
        "/v1/chat/completions",
        json=body,
        headers={**auth(CHAT_KEY), "x-contextwarden-policy": "middle"},
    )
    assert chosen.status_code == 200
    kept = orjson.loads(route.calls.last.request.content)["messages"]
    assert kept[1] == body["messages"][1]  # middle_out keeps the start of the history
    assert "x-contextwarden-policy" not in route.calls.last.request.headers
    refused = await client.post(
        "/v1/chat/completions",
        json=chat_body(),
        headers={**auth(SEARCH_KEY), "x-contextwarden-policy": "middle"},
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "policy_not_allowed"
    off = await client.post(
        "/v1/chat/completions",
        json={**body, "contextwarden": {"trim": False}},
        headers=auth(CHAT_KEY),
    )
    assert off.headers["x-contextwarden-actions"] == "trimming-disabled"
    forwarded = orjson.loads(route.calls.last.request.content)
    assert "contextwarden" not in forwarded and len(forwarded["messages"]) == len(body["messages"])
    not_allowed = await client.post(
        "/v1/chat/completions",
        json={**chat_body(), "contextwarden": {"trim": False}},
        headers=auth(SEARCH_KEY),
    )
    assert not_allowed.status_code == 403


@respx.mock
async def test_metrics_move_after_real_requests(client: httpx.AsyncClient) -> None:
    respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    before = (await client.get("/metrics", headers=auth(ADMIN_KEY))).text
    assert (
        'contextwarden_requests_total{format="chat",model="gpt-4o-mini",status="200",team="search"}'
        not in before
    )
    for _ in range(3):
        await client.post("/v1/chat/completions", json=chat_body(), headers=auth(SEARCH_KEY))
    text = (await client.get("/metrics", headers=auth(ADMIN_KEY))).text
    assert (
        'contextwarden_requests_total{format="chat",model="gpt-4o-mini",status="200",team="search"} 3.0'
        in text
    )
    assert (
        'contextwarden_rewritten_requests_total{action="truncate_oldest",format="chat",team="search"} 3.0'
        in text
    )
    assert 'contextwarden_prompt_tokens_before_count{team="search"} 3.0' in text
    saved = next(
        line
        for line in text.splitlines()
        if line.startswith('contextwarden_tokens_saved_total{team="search"}')
    )
    assert float(saved.split()[-1]) > 1000
    assert "contextwarden_proxy_overhead_seconds_count 3.0" in text
    assert "contextwarden_summarizer_calls_total 0.0" in text


@respx.mock
async def test_access_log_has_no_key_and_no_content_by_default(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    with caplog.at_level(logging.INFO, logger="contextwarden"):
        await client.post("/v1/chat/completions", json=chat_body(), headers=auth(SEARCH_KEY))
        await client.post("/v1/chat/completions", json=chat_body(), headers=auth("cw-wrong-key"))
    lines = [r.getMessage() for r in caplog.records if r.name == "contextwarden.access"]
    assert len(lines) == 2
    refused = orjson.loads(lines[1])
    assert (refused["status"], refused["team"]) == (401, "-")
    record = orjson.loads(lines[0])
    assert (
        record["team"] == "search"
        and record["status"] == 200
        and record["tokens_before"] > record["tokens_after"]
    )
    assert record["actions"] == ["truncate_oldest", "ledger"]
    everything = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (SEARCH_KEY, UPSTREAM_KEY, "final question", "Bearer"):
        assert secret not in everything


@respx.mock
async def test_a_refused_streamed_request_is_logged_as_streamed(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream unreachable: the 502's access line says the request streamed (it said
    false for every refusal)."""
    respx.post(f"{BASE}/chat/completions").mock(side_effect=httpx.ConnectError("refused"))
    with caplog.at_level(logging.INFO, logger="contextwarden"):
        body = chat_body(stream=True)
        response = await client.post("/v1/chat/completions", json=body, headers=auth(SEARCH_KEY))
    assert response.status_code == 502
    lines = [r.getMessage() for r in caplog.records if r.name == "contextwarden.access"]
    assert [orjson.loads(x)["stream"] for x in lines] == [True]


class SlowFirstEvent(httpx.AsyncByteStream):
    """A stream whose first event comes after ``delay`` seconds (a reasoning model's)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await asyncio.sleep(self.delay)
        yield b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
        yield b"data: [DONE]\n\n"


@respx.mock
async def test_a_streams_wait_for_its_first_event_is_the_upstreams_time(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The proxy reads a stream's first events before relaying it (an overflow may come
    inside it): that wait is the upstream's, not the proxy's overhead (it was counted as
    overhead: seconds of it, for a model that thinks before its first event)."""
    stream = SlowFirstEvent(0.4)
    headers = {"content-type": "text/event-stream"}
    respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, headers=headers, stream=stream)
    )
    with caplog.at_level(logging.INFO, logger="contextwarden"):
        body = chat_body(stream=True)
        response = await client.post("/v1/chat/completions", json=body, headers=auth(SEARCH_KEY))
    assert response.status_code == 200 and b"[DONE]" in response.content
    lines = [r.getMessage() for r in caplog.records if r.name == "contextwarden.access"]
    record = orjson.loads(lines[-1])
    assert record["upstream_ms"] >= 400
    assert record["overhead_ms"] < 300


@respx.mock
async def test_access_log_includes_content_only_when_asked(
    keys: None, caplog: pytest.LogCaptureFixture
) -> None:
    respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    async with running(config(log_content=True)) as c:
        with caplog.at_level(logging.INFO, logger="contextwarden.access"):
            await c.post("/v1/chat/completions", json=chat_body(), headers=auth(SEARCH_KEY))
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "final question" in text
    assert SEARCH_KEY not in text


@respx.mock
async def test_admin_api_needs_the_admin_key(client: httpx.AsyncClient) -> None:
    respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    await client.post("/v1/chat/completions", json=chat_body(), headers=auth(SEARCH_KEY))
    assert (await client.get("/admin/stats", headers=auth(SEARCH_KEY))).status_code == 401
    assert (await client.get("/admin/stats")).status_code == 401
    stats = (await client.get("/admin/stats", headers=auth(ADMIN_KEY))).json()
    assert stats["teams"]["search"]["requests"] == 1
    assert stats["teams"]["search"]["rewritten"] == 1
    assert stats["teams"]["search"]["tokens_saved"] > 0
    windows = await client.get("/admin/learned-windows", headers=auth(ADMIN_KEY))
    assert windows.json() == {
        "learned_windows": {},
        "evidence": {},
        "calibration": {},
        "without_figures": {},
        "discovered": {},
    }
    preview = await client.post(
        "/admin/preview",
        json=chat_body(),
        headers={**auth(ADMIN_KEY), "x-contextwarden-team": "search"},
    )
    assert preview.json()["report"]["team"] == "search"
    assert preview.json()["report"]["policy"] == "rag"


@respx.mock
async def test_passthrough_paths_need_a_key_in_keys_mode(client: httpx.AsyncClient) -> None:
    route = respx.post(f"{BASE}/embeddings").mock(
        return_value=httpx.Response(200, json={"data": []})
    )
    assert (await client.post("/v1/embeddings", json={"input": "x"})).status_code == 401
    assert (
        await client.post("/v1/embeddings", json={"input": "x"}, headers=auth(CHAT_KEY))
    ).status_code == 200
    assert route.calls.last.request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


@pytest.mark.parametrize(
    ("named", "said"),
    [(None, "admin_key_env: CW_ADMIN_KEY"), ("CW_UNSET_ADMIN", "set CW_UNSET_ADMIN")],
)
def test_a_disabled_admin_api_says_what_turns_it_on(
    monkeypatch: pytest.MonkeyPatch, named: str | None, said: str
) -> None:
    """No variable named: name one; one named but unset: set it (it said to name it)."""
    from starlette.datastructures import Headers

    from proxy.config.settings import load_settings
    from proxy.edge.auth import Authenticator
    from proxy.errors import Forbidden

    monkeypatch.delenv("CW_UNSET_ADMIN", raising=False)
    auth = Authenticator(load_settings(None, admin_key_env=named))
    with pytest.raises(Forbidden, match=said):
        auth.admin(Headers({"authorization": "Bearer x"}))
