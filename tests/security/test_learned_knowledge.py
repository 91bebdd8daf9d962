"""What the proxy learns about windows and capabilities, attacked (issue #55, fourth pass): a
server's absurd figure (F7), a model name that is a path (F10)."""

from __future__ import annotations

import tempfile
from typing import Any

import httpx
import pytest
import respx

from tests.proxy.upstreams.test_forwarding import BASE, _running
from tests.proxy.windows.test_window_learning import MODEL, ROOT, Upstream, config, no_figures


def ollama_says(context: Any) -> None:
    """An Ollama whose loaded model's ``context_length`` is ``context``."""
    loaded = {"name": MODEL, "model": MODEL, "size": 1, "context_length": context}
    cards = {"object": "list", "data": [{"id": MODEL, "owned_by": "library"}]}
    respx.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json=cards))
    respx.get(f"{ROOT}/api/ps").mock(return_value=httpx.Response(200, json={"models": [loaded]}))


@pytest.mark.parametrize("context", [10**300, 3.7, 1, 1e300, -5, "8192"])
@respx.mock
async def test_an_absurd_discovered_window_is_unknown_never_a_500(
    monkeypatch: pytest.MonkeyPatch, context: Any
) -> None:
    # F7: 300 digits raised OverflowError (a 500 on every request of the model); 3.7 became 3
    # and 1 passed (every request refused); 1e300 passed.
    upstream = Upstream(100_000, no_figures)
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    ollama_says(context)
    admin = {"authorization": "Bearer cw-admin"}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}]}
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch)) as client:
            answer = await client.post("/v1/chat/completions", json=body)
            said = (await client.get(f"/admin/windows/default/{MODEL}", headers=admin)).json()
    assert answer.status_code == 200, answer.text
    assert said["upstream_window"] is None  # unknown: the figure was no window
    assert upstream.sent  # the request reached the upstream


@pytest.mark.parametrize("name", ["..", ".", "a/../../admin", "x\\..", "bad\nname"])
@respx.mock
async def test_a_model_name_never_becomes_a_path_of_the_servers_api(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # F10: a model named ``..`` was asked for as /api/v0/models/.. (LM Studio's discovery).
    asked = respx.get(url__startswith=ROOT).mock(return_value=httpx.Response(404))
    respx.post(f"{BASE}/chat/completions").mock(side_effect=Upstream(100_000, no_figures))
    body = {"model": name, "messages": [{"role": "user", "content": "hello"}]}
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="lmstudio")) as client:
            answer = await client.post("/v1/chat/completions", json=body)
    assert answer.status_code < 500
    paths = [c.request.url.raw_path.decode() for c in asked.calls]
    assert not [p for p in paths if p.startswith("/api/v0")], paths


@pytest.mark.parametrize("limit", ["9" * 5000, "9" * 300, "3"])
@respx.mock
async def test_an_absurd_figure_in_an_overflow_error_is_no_window_never_a_500(
    monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    # F7, the learned side: the figure an overflow error states is a window too.
    def over(n: int) -> httpx.Response:
        message = f"This model's maximum context length is {limit} tokens. Please reduce it."
        error = {"message": message, "type": "invalid_request_error", "code": None}
        return httpx.Response(400, json={"error": error})

    respx.post(f"{BASE}/chat/completions").mock(side_effect=Upstream(50, over))
    admin = {"authorization": "Bearer cw-admin"}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello " * 60}]}
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            answer = await client.post("/v1/chat/completions", json=body)
            listed = (await client.get("/admin/learned-windows", headers=admin)).json()
    assert answer.status_code == 400, answer.text  # the upstream's refusal, relayed
    assert listed["learned_windows"] == {}
