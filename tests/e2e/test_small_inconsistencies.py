"""Small things a user notices: headers on refusals, error arithmetic, honest model lists."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import httpx

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.e2e.conftest import MODEL, Stack


def too_big_a_system_prompt(stack: Stack) -> httpx.Response:
    system = {"role": "system", "content": "rule " * 3000}
    body = {"model": MODEL, "messages": [system, {"role": "user", "content": "hi"}]}
    return httpx.post(f"{stack.proxy_url}/v1/chat/completions", json=body)


def test_the_proxys_own_400s_carry_the_headers(stack: Stack) -> None:
    response = too_big_a_system_prompt(stack)
    assert response.status_code == 400
    for name in ("tokens-before", "tokens-after", "budget", "actions", "retries", "count"):
        assert f"x-contextwarden-{name}" in response.headers
    assert response.headers["x-contextwarden-actions"] == "rejected"


def test_a_refusal_says_its_figures(stack: Stack) -> None:
    """The headers carry what the message states: the request's tokens, what the part that
    must be kept takes, the budget for messages (they said ``unknown``)."""
    response = too_big_a_system_prompt(stack)
    message = response.json()["error"]["message"]
    needed, budget = map(
        int, re.search(r"takes (\d+) tokens.* of the (\d+) tokens", message).groups()
    )
    headers = response.headers
    assert int(headers["x-contextwarden-budget"]) == budget
    assert int(headers["x-contextwarden-tokens-after"]) >= needed
    assert int(headers["x-contextwarden-tokens-before"]) >= needed
    assert headers["x-contextwarden-count"] == "exact"


def test_a_does_not_fit_message_adds_up(stack: Stack) -> None:
    response = too_big_a_system_prompt(stack)
    message = response.json()["error"]["message"]
    left, total, taken = map(int, re.search(
        r"only (\d+) of the (\d+) tokens for messages are left for it \((\d+) go", message
    ).groups())  # fmt: skip
    assert left + taken == total
    assert f"= {total} tokens for messages" in message


def test_models_with_an_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    config = {
        "upstreams": {"up": {"base_url": f"http://127.0.0.1:{dead}/v1"}},
        "data_dir": str(tmp_path),
    }
    with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
        models = httpx.get(f"{proxy.url}/v1/models")
        chat = httpx.post(
            f"{proxy.url}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert models.status_code == 502
    assert chat.status_code == 502
    for response in (models, chat):
        assert "ssl:default" not in response.text
        assert f"127.0.0.1:{dead}" in response.json()["error"]["message"]


def test_models_offline_lists_the_configured_models(tmp_path: Path) -> None:
    """The README says /v1/models lists the configured models: with the upstream unreachable
    it still does (it was a 502); with none configured the 502 stands (above)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    config = {
        "upstreams": {"up": {"base_url": f"http://127.0.0.1:{dead}/v1"}},
        "models": {"local-model": {"context_window": 8192}, "claude-*": {"context_window": 1}},
        "data_dir": str(tmp_path),
    }
    with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
        models = httpx.get(f"{proxy.url}/v1/models")
    assert models.status_code == 200
    assert [m["id"] for m in models.json()["data"]] == ["local-model"]
