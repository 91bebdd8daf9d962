"""A model's window learned at run time, through the app: from an overflow with figures or
without, for a model in no table; from a llama.cpp error whatever its status; from an Ollama that
truncates silently; and read from the server. Each upstream here is a fake that counts with
o200k and answers a growing conversation as its server does."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
import respx

from proxy.windows.tokenizers import get_encoding
from tests.clients.scripted import OVER_WINDOW
from tests.proxy.upstreams.test_forwarding import BASE, _running

MODEL = "local-coder"  # in no table: its window is unknown until something says it
ROOT = BASE.removesuffix("/v1")
ADMIN = "cw-admin"


def tokens(messages: list[dict[str, Any]]) -> int:
    encoding = get_encoding("o200k_base")
    return sum(4 + len(encoding.encode_ordinary(str(m["content"]))) for m in messages) + 3


def answer(messages: list[dict[str, Any]], read: int) -> httpx.Response:
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": read, "completion_tokens": 1, "total_tokens": read + 1},
    }
    return httpx.Response(200, json=body)


class Upstream:
    """A chat upstream whose window is ``window`` prompt tokens, answering over it with
    ``over`` (an error response), or truncating silently as Ollama does (``over`` None)."""

    def __init__(self, window: int, over: Callable[[int], httpx.Response] | None) -> None:
        self.window, self.over = window, over
        self.refused = 0
        self.truncated = 0
        self.sent: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        messages = orjson.loads(request.content)["messages"]
        n = tokens(messages)
        self.sent.append(n)
        if n <= self.window:
            return answer(messages, n)
        if self.over is not None:
            self.refused += 1
            return self.over(n)
        self.truncated += 1
        while len(messages) > 1 and tokens(messages) > self.window:  # system messages: none here
            messages = messages[1:]
        return answer(messages, tokens(messages))


def openai_figures(window: int) -> Callable[[int], httpx.Response]:
    def over(n: int) -> httpx.Response:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {n} tokens. Please reduce the length of the messages."
        )
        error = {
            "message": message,
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
        return httpx.Response(400, json={"error": error})

    return over


def no_figures(n: int) -> httpx.Response:
    error = {
        "message": OVER_WINDOW,
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
    return httpx.Response(400, json={"error": error})


def llamacpp_500(window: int) -> Callable[[int], httpx.Response]:
    def over(n: int) -> httpx.Response:
        error = {
            "code": 500,
            "message": f"request ({n} tokens) exceeds the available context size ({window} "
            "tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n,
            "n_ctx": window,
        }
        return httpx.Response(500, json={"error": error})

    return over


def config(data: str, monkeypatch: pytest.MonkeyPatch, **upstream: Any) -> dict[str, Any]:
    monkeypatch.setenv("CW_ADMIN", ADMIN)
    return {
        "data_dir": data,
        "upstreams": {"local": {"base_url": BASE, **upstream}},
        "default_upstream": "local",
        "admin_key_env": "CW_ADMIN",
        "policies": {"default": {"summarize": False}},
    }


def turn(k: int) -> list[dict[str, Any]]:
    text = " ".join(f"line {k}.{i} of the build log: module {i * k} compiled" for i in range(12))
    return [{"role": "user", "content": text}, {"role": "assistant", "content": f"noted {k}"}]


async def converse(client: httpx.AsyncClient, turns: int) -> list[httpx.Response]:
    """A conversation that grows by a turn a request; every answer."""
    messages: list[dict[str, Any]] = []
    out = []
    for k in range(turns):
        messages += turn(k)
        body = {"model": MODEL, "messages": [*messages, {"role": "user", "content": "next?"}]}
        out.append(await client.post("/v1/chat/completions", json=body))
    return out


async def window(client: httpx.AsyncClient) -> dict[str, Any]:
    admin = {"authorization": f"Bearer {ADMIN}"}
    got = await client.get(f"/admin/windows/default/{MODEL}", headers=admin)
    return dict(got.json())


@respx.mock
async def test_a_model_in_no_table_is_retried_at_the_window_its_overflow_states(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upstream = Upstream(3000, openai_figures(3000))
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            answers = await converse(client, 30)
            said = await window(client)
    assert all(a.status_code == 200 for a in answers)
    retried = [a for a in answers if a.headers["x-contextwarden-retries"] != "0"]
    assert len(retried) == upstream.refused == 1
    assert "overflow-retry" in retried[0].headers["x-contextwarden-actions"]
    assert answers[0].headers["x-contextwarden-actions"] == "unknown-window"
    assert said["upstream_window"] == 3000
    assert any("learned from the upstream's overflow error" in w for w in said["why"])


@respx.mock
async def test_without_figures_the_window_is_narrowed_persisted_and_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upstream = Upstream(3000, no_figures)
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    admin = {"authorization": f"Bearer {ADMIN}"}
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            answers = await converse(client, 40)
            said = await window(client)
        assert all(a.status_code == 200 for a in answers)
        assert 1 <= upstream.refused <= 3
        assert max(upstream.sent[-10:]) <= 3000  # settled under the window
        learned = said["upstream_window"]
        assert learned >= 3000 * 0.9  # most of the window, in the upstream's units
        assert any("learned without figures" in w for w in said["why"])
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            assert (await window(client))["upstream_window"] == learned  # kept in the store
            gone = await client.delete(f"/admin/learned-windows/default/{MODEL}", headers=admin)
            assert gone.status_code == 200
            assert (await window(client))["window"] is None  # unknown again


@respx.mock
async def test_a_llamacpp_overflow_answered_with_500_is_learned_and_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upstream = Upstream(3000, llamacpp_500(3000))
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            answers = await converse(client, 30)
            said = await window(client)
    assert all(a.status_code == 200 for a in answers)
    assert upstream.refused == 1
    assert said["upstream_window"] == 3000  # read from its n_ctx field


@respx.mock
async def test_ollamas_silent_truncation_is_told_learned_and_fitted_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ollama at num_ctx: no error, the prompt cut from its start, and a usage that counts what
    was kept. The proxy tells it from the usage, says so, and fits the next requests."""
    upstream = Upstream(3000, None)
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            answers = await converse(client, 40)
            said = await window(client)
            metrics = (await client.get("/metrics")).text
    told = [a for a in answers if "x-contextwarden-upstream-truncated" in a.headers]
    assert 1 <= len(told) == upstream.truncated <= 3
    read, sent = told[0].headers["x-contextwarden-upstream-truncated"].split(" of ")
    assert int(read) <= 3000 < int(sent)
    assert max(upstream.sent[-10:]) <= 3000  # fitted since
    assert any("learned without figures" in w for w in said["why"])
    # A model not configured is counted as "other" (the labels stay a bounded set).
    assert 'contextwarden_upstream_truncations_total{model="other",team="default"} ' in metrics


def ollama_routes(context: int) -> None:
    loaded = {"name": MODEL, "model": MODEL, "size": 1, "context_length": context}
    respx.get(f"{BASE}/models").mock(
        return_value=httpx.Response(
            200, json={"object": "list", "data": [{"id": MODEL, "owned_by": "library"}]}
        )
    )
    respx.get(f"{ROOT}/api/ps").mock(return_value=httpx.Response(200, json={"models": [loaded]}))


@respx.mock
async def test_the_window_is_read_from_the_server_once_and_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upstream = Upstream(3000, no_figures)
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    ollama_routes(3000)
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch)) as client:
            answers = await converse(client, 30)
            said = await window(client)
        asked = len(respx.calls) - len(upstream.sent)
        assert all(a.status_code == 200 for a in answers) and upstream.refused == 0
        assert asked == 2  # /v1/models and /api/ps, once
        assert said["upstream_window"] == 3000
        assert said["why"][0].startswith(f"3000: discovered from Ollama at {BASE}")
        respx.get(f"{ROOT}/api/ps").mock(return_value=httpx.Response(503))
        async with _running(config(data, monkeypatch)) as client:  # the server is down
            assert (await window(client))["upstream_window"] == 3000  # kept in the store


@respx.mock
async def test_a_configured_window_wins_and_discovery_can_be_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    respx.post(f"{BASE}/chat/completions").mock(side_effect=Upstream(100_000, no_figures))
    ollama_routes(3000)
    with tempfile.TemporaryDirectory() as data:
        configured = config(data, monkeypatch)
        configured["models"] = {MODEL: {"context_window": 8000}}
        async with _running(configured) as client:
            await converse(client, 2)
            assert (await window(client))["upstream_window"] == 8000
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            await converse(client, 2)
            assert (await window(client))["upstream_window"] is None
    assert not [c for c in respx.calls if c.request.method == "GET"]
