"""Every other ``/v1/*`` path, forwarded untouched (proxy/edge/passthrough.py): what a forwarded
body is read for, which upstream a request that names no model addressed, the allowlist's
label, the model list in the client's shape with the windows the proxy fits to; and, in-process
against a respx upstream, the request and answer as they came, the team's limits whatever the
body's type, the keys mode's allowlist and stored objects."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
import respx
from starlette.applications import Starlette
from starlette.datastructures import Headers

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.edge.passthrough import (
    ACTED_ON,
    acted_on,
    addressed_upstream,
    anthropic_list,
    path_label,
)
from proxy.runtime import Runtime
from tests.respx_transport import HttpxTransport

OPENAI = "http://openai.test/v1"
ANTHROPIC = "http://anthropic.test/v1"
UPSTREAMS = {
    "openai": {"base_url": OPENAI},
    "claude": {"base_url": ANTHROPIC, "provider": "anthropic"},
}
MODELS = {"small": {"context_window": 600, "tokenizer": "o200k_base", "upstream": "openai"}}
TEAMS = {"default": {}, "limited": {"models": ["small"]}, "capped": {"max_context_tokens": 400}}


def test_a_path_is_labelled_by_the_pattern_it_matches() -> None:
    patterns = ["embeddings", "audio/*", "responses"]
    assert path_label("audio/transcriptions", patterns) == "audio/*"
    assert path_label("embeddings", patterns) == "embeddings"
    assert path_label("files/file-abc/content", patterns) == "other"  # a bounded label


def test_a_forwarded_body_is_read_for_what_the_proxy_acts_on_only() -> None:
    body = orjson.dumps(
        {"model": "small", "n": 2, "input": [{"type": "item_reference", "id": "msg_abc123"},
         {"role": "user", "content": "hi"}], "encoding_format": "float", "dimensions": 8}
    )  # fmt: skip
    error, param, payload = acted_on(body, "application/json")
    assert error is None and param is None
    assert payload == {"model": "small", "n": 2, "input": [{"type": "item_reference",
                                                           "id": "msg_abc123"}]}  # fmt: skip
    assert set(payload) <= {*ACTED_ON, "input"}
    assert acted_on(b"raw audio bytes", "audio/wav") == (None, None, None)


def test_an_unreadable_forwarded_body_is_said_not_raised() -> None:
    """``acted_on`` may run in the worker process: its refusals come back as values."""
    error, param, payload = acted_on(b"{oops", "application/json")
    assert error is not None and "not valid JSON" in error and payload is None
    error, param, _ = acted_on(b"n=1&n=9", "application/x-www-form-urlencoded")
    assert param == "n" and error is not None


def test_a_request_naming_no_model_goes_to_the_upstream_its_api_addressed() -> None:
    settings = load_settings(None, upstreams=UPSTREAMS, default_upstream="openai")
    assert addressed_upstream(settings, Headers({})) == "openai"
    anthropic_client = Headers({"anthropic-version": "2023-06-01"})
    assert addressed_upstream(settings, anthropic_client) == "claude"
    # A default that serves Messages itself keeps them.
    messages_too = {
        **UPSTREAMS,
        "openai": {"base_url": OPENAI, "apis": ["chat_completions", "messages"]},
    }
    both = load_settings(None, upstreams=messages_too, default_upstream="openai")
    assert addressed_upstream(both, anthropic_client) == "openai"
    alone = load_settings(None, upstreams={"openai": {"base_url": OPENAI}})
    assert addressed_upstream(alone, anthropic_client) == "openai"  # none serves Messages


def test_a_model_list_in_anthropics_shape() -> None:
    listed = [
        {"id": "a", "object": "model", "created": 0, "context_window": 9, "owned_by": "x"},
        {"id": "b", "created": True, "display_name": "Model B", "max_tokens": 4},
    ]
    page = anthropic_list(listed)
    assert page == {
        "data": [
            {"type": "model", "id": "a", "display_name": "a",
             "created_at": "1970-01-01T00:00:00Z", "context_window": 9},
            {"type": "model", "id": "b", "display_name": "Model B",
             "created_at": "1970-01-01T00:00:00Z", "max_tokens": 4},
        ],
        "has_more": False, "first_id": "a", "last_id": "b",
    }  # fmt: skip
    assert anthropic_list([]) == {"data": [], "has_more": False, "first_id": None, "last_id": None}
    stamped = anthropic_list([{"id": "c", "created": 1_700_000_000}])["data"][0]
    assert stamped["created_at"] == "2023-11-14T22:13:20Z"


@asynccontextmanager
async def serving(**config: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    base = {"upstreams": UPSTREAMS, "default_upstream": "openai", "models": MODELS,
            "policies": {"default": {"summarize": False}}, "teams": TEAMS}  # fmt: skip
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(None, data_dir=data, **{**base, **config})
        app: Starlette = create_app(settings, HttpxTransport())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                yield c, app.state.runtime


@respx.mock
async def test_the_request_and_its_answer_go_as_they_came() -> None:
    answer = b'{"object": "list",  "data": [{"embedding": [0.5]}]}'
    route = respx.post(f"{OPENAI}/embeddings").mock(
        return_value=httpx.Response(201, content=answer, headers={"x-upstream": "1"})
    )
    body = b'{"model":"small", "input":"hi",  "dimensions":8}'
    async with serving() as (client, rt):
        got = await client.post(
            "/v1/embeddings?api-version=2", content=body,
            headers={"content-type": "application/json", "authorization": "Bearer sk-caller"},
        )  # fmt: skip
        assert rt.metrics.teams["default"].unfitted == 1  # counted by path
    sent = route.calls.last.request
    assert sent.content == body and sent.url.query == b"api-version=2"
    assert sent.headers["authorization"] == "Bearer sk-caller"  # passthrough: the caller's key
    assert (got.status_code, got.content) == (201, answer)
    assert got.headers["x-upstream"] == "1"
    assert got.headers["x-contextwarden-actions"] == "not-fitted"


@respx.mock
async def test_a_limited_teams_model_is_checked_whatever_type_the_body_declares() -> None:
    route = respx.post(f"{OPENAI}/images/generations").mock(return_value=httpx.Response(200))
    async with serving() as (client, _):
        for body, content_type in [
            (b'{"model": "gpt-image-1", "prompt": "x"}', "application/json"),
            (b'{"model": "gpt-image-1", "prompt": "x"}', "text/plain"),
            (b"model=gpt-image-1&prompt=x", "application/x-www-form-urlencoded"),
            (b'{"prompt": "x"}', "application/json"),  # names none: a limited team must
        ]:
            headers = {"content-type": content_type, "x-contextwarden-team": "limited"}
            got = await client.post("/v1/images/generations", content=body, headers=headers)
            assert got.status_code == 403, (body, content_type)
            assert orjson.loads(got.content)["error"]["code"] == "model_not_allowed"
    assert not route.called


@respx.mock
async def test_a_limited_team_may_not_spend_on_a_forwarded_path() -> None:
    route = respx.post(f"{OPENAI}/images/generations").mock(return_value=httpx.Response(200))
    async with serving() as (client, _):
        got = await client.post(
            "/v1/images/generations", content=b"model=small&n=4",
            headers={"content-type": "application/x-www-form-urlencoded",
                     "x-contextwarden-team": "limited"},
        )  # fmt: skip
        bad = await client.post("/v1/embeddings", json={"model": 7, "input": "x"})
    assert got.status_code == 403 and not route.called
    assert orjson.loads(got.content)["error"]["code"] == "option_not_allowed"
    assert bad.status_code == 400 and orjson.loads(bad.content)["error"]["param"] == "model"


@respx.mock
async def test_keys_mode_forwards_the_allowlist_with_the_operators_key_to_the_owner_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PT_RED", "cw-red")
    monkeypatch.setenv("PT_BLUE", "cw-blue")
    monkeypatch.setenv("PT_UPSTREAM", "sk-operator")
    items = respx.get(f"{OPENAI}/responses/resp_made0001/input_items").mock(
        return_value=httpx.Response(200, json={"data": []})
    )
    upstreams = {"openai": {"base_url": OPENAI, "api_key_env": "PT_UPSTREAM"}}
    teams = {"red": {"key_envs": ["PT_RED"]}, "blue": {"key_envs": ["PT_BLUE"]}}
    red, blue = {"authorization": "Bearer cw-red"}, {"authorization": "Bearer cw-blue"}
    async with serving(auth="keys", upstreams=upstreams, teams=teams) as (client, _):
        files = await client.get("/v1/files", headers=red)  # not in forward_paths
        assert files.status_code == 403
        assert orjson.loads(files.content)["error"]["code"] == "path_not_allowed"
    async with serving(
        auth="keys", upstreams=upstreams, teams=teams, forward_paths=["responses/*/input_items"]
    ) as (client, rt):
        await rt.owners.claim("red", ["resp_made0001"])
        theirs = await client.get("/v1/responses/resp_made0001/input_items", headers=blue)
        assert theirs.status_code == 403
        assert orjson.loads(theirs.content)["error"]["code"] == "not_your_object"
        ours = await client.get("/v1/responses/resp_made0001/input_items", headers=red)
        assert ours.status_code == 200 and items.call_count == 1
        assert items.calls.last.request.headers["authorization"] == "Bearer sk-operator"


@respx.mock
async def test_the_model_list_adds_the_configured_models_with_their_windows() -> None:
    upstream_list = {"object": "list", "data": [{"id": "small", "object": "model",
                                                 "context_window": 128_000}]}  # fmt: skip
    respx.get(f"{OPENAI}/models").mock(return_value=httpx.Response(200, json=upstream_list))
    extra = {**MODELS, "local": {"context_window": 1000, "tokenizer": "o200k_base"}}
    async with serving(models=extra) as (client, _):
        listed = (await client.get("/v1/models")).json()["data"]
        capped = await client.get("/v1/models", headers={"x-contextwarden-team": "capped"})
        limited = await client.get("/v1/models", headers={"x-contextwarden-team": "limited"})
    windows = {m["id"]: m["context_window"] for m in listed}
    assert windows == {"small": 600, "local": 1000}  # the proxy's window, lower than stated
    assert {m["id"]: m["context_window"] for m in capped.json()["data"]} == {
        "small": 400, "local": 400,
    }  # fmt: skip
    assert [m["id"] for m in limited.json()["data"]] == ["small"]


@respx.mock
async def test_an_unreachable_upstream_still_lists_the_configured_models() -> None:
    respx.get(f"{OPENAI}/models").mock(side_effect=httpx.ConnectError("refused"))
    async with serving() as (client, _):
        got = await client.get("/v1/models")
    assert got.status_code == 200
    assert [m["id"] for m in got.json()["data"]] == ["small"]
    assert got.json()["data"][0]["owned_by"] == "contextwarden"


@respx.mock
async def test_a_forwarded_answers_new_object_is_its_teams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PT_RED", "cw-red")
    monkeypatch.setenv("PT_BLUE", "cw-blue")
    made = {"id": "batch_made0001", "object": "batch"}
    respx.post(f"{OPENAI}/batches").mock(return_value=httpx.Response(200, json=made))
    read = respx.get(f"{OPENAI}/batches/batch_made0001").mock(
        return_value=httpx.Response(200, json=made)
    )
    teams = {"red": {"key_envs": ["PT_RED"]}, "blue": {"key_envs": ["PT_BLUE"]}}
    red, blue = {"authorization": "Bearer cw-red"}, {"authorization": "Bearer cw-blue"}
    paths = ["batches", "batches/*"]
    async with serving(auth="keys", teams=teams, forward_paths=paths) as (client, _):
        created = await client.post("/v1/batches", json={"input_file_id": "f"}, headers=red)
        assert created.status_code == 200
        theirs = await client.get("/v1/batches/batch_made0001", headers=blue)
        ours = await client.get("/v1/batches/batch_made0001", headers=red)
    assert theirs.status_code == 403
    assert orjson.loads(theirs.content)["error"]["code"] == "not_your_object"
    assert ours.status_code == 200 and read.call_count == 1
