"""The Host and Origin checks (proxy/edge/origins.py): a proxy that spends keys of its own answers
only to the Host names it serves under and to no browser Origin it was not told of, before
routing; /health and /ready are exempt, and a proxy that holds no key checks nothing."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from starlette.types import Message, Receive, Scope, Send

from proxy.config.settings import Settings, load_settings
from proxy.edge.origins import TrustedCallers


def holding_a_key(monkeypatch: pytest.MonkeyPatch, **extra: Any) -> Settings:
    monkeypatch.setenv("ORIGINS_TEST_KEY", "sk-held")
    upstreams = {"demo": {"base_url": "http://upstream.test/v1", "api_key_env": "ORIGINS_TEST_KEY"}}
    return load_settings(None, upstreams=upstreams, **extra)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """What a request reaches once it passes the checks."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"reached"})


async def get(
    guard: TrustedCallers, path: str = "/v1/chat/completions", **headers: str
) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard)) as client:
        return await client.post(f"http://127.0.0.1:8080{path}", headers=headers, content=b"{}")


def headers(host: str, origin: str | None = None) -> list[tuple[bytes, bytes]]:
    found = [(b"host", host.encode())]
    return found + ([(b"origin", origin.encode())] if origin is not None else [])


def test_on_loopback_the_loopback_names_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = TrustedCallers(app, holding_a_key(monkeypatch))
    for host in ["localhost", "localhost:8080", "127.0.0.1:8080", "127.0.0.2", "[::1]:8080"]:
        assert guard.refusal(headers(host)) is None, host


def test_on_loopback_any_other_host_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = TrustedCallers(app, holding_a_key(monkeypatch))
    for host in ["evil.example", "evil.example:8080", "localhost.evil.example", "10.0.0.1", ""]:
        reason = guard.refusal(headers(host))
        assert reason is not None and "loopback" in reason, host


def test_allowed_hosts_replace_the_loopback_names(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = TrustedCallers(app, holding_a_key(monkeypatch, allowed_hosts=["Proxy.Internal"]))
    assert guard.refusal(headers("proxy.internal:8080")) is None  # any port, any case
    assert guard.refusal(headers("localhost")) is not None
    reason = guard.refusal(headers("other.internal"))
    assert reason is not None and "allowed_hosts" in reason


def test_bound_elsewhere_any_host_passes_unless_hosts_are_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    open_proxy = holding_a_key(monkeypatch, host="0.0.0.0", allow_open_proxy=True)
    assert TrustedCallers(app, open_proxy).refusal(headers("proxy.example.com")) is None


def test_a_browser_origin_is_refused_unless_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = TrustedCallers(app, holding_a_key(monkeypatch))
    reason = guard.refusal(headers("localhost", "https://evil.example"))
    assert reason is not None and "https://evil.example" in reason
    listed = holding_a_key(monkeypatch, allowed_origins=["https://App.Example/"])
    assert TrustedCallers(app, listed).refusal(headers("localhost", "https://app.example")) is None


async def test_a_refusal_is_a_403_in_the_clients_shape_before_routing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guard = TrustedCallers(app, holding_a_key(monkeypatch))
    chat = await get(guard, host="evil.example")
    assert chat.status_code == 403 and chat.content != b"reached"
    assert orjson.loads(chat.content)["error"]["code"] == "untrusted_caller"
    messages = await get(guard, "/v1/messages", host="evil.example")
    assert messages.status_code == 403
    assert orjson.loads(messages.content)["error"]["type"] == "permission_error"
    assert orjson.loads(messages.content)["type"] == "error"  # Anthropic's shape
    assert (await get(guard, host="localhost:8080")).content == b"reached"


async def test_health_and_ready_are_exempt(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = TrustedCallers(app, holding_a_key(monkeypatch))
    for path in ("/health", "/ready"):
        assert (await get(guard, path, host="lb.internal")).content == b"reached"


async def test_a_proxy_holding_no_key_checks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORIGINS_TEST_KEY", raising=False)
    settings = load_settings(None, upstreams={"demo": {"base_url": "http://upstream.test/v1"}})
    guard = TrustedCallers(app, settings)
    answer = await get(guard, host="evil.example", origin="https://evil.example")
    assert answer.content == b"reached"


async def test_a_websocket_handshake_from_a_page_is_closed_unaccepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reached: list[Scope] = []

    async def websocket_app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope)

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "websocket",
        "path": "/v1/responses",
        "headers": headers("localhost", "https://evil.example"),
    }
    await TrustedCallers(websocket_app, holding_a_key(monkeypatch))(scope, receive, send)
    assert sent == [{"type": "websocket.close", "code": 1008}] and not reached
