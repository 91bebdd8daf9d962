"""A web page cannot make a loopback proxy spend its keys: Host and Origin are checked whenever
the proxy holds a credential, wherever it is configured (api_key_env or headers:)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.security.conftest import Capture, ProxyFactory

BODY = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})


def passthrough(capture: Capture, **upstream: Any) -> dict[str, Any]:
    return {
        "upstreams": {"main": {"base_url": f"{capture.url}/v1", **upstream}},
        "models": {"gpt-4o": {"context_window": 8000}},
        "policies": {"default": {"summarize": False}},
    }


HELD = [{"api_key_env": "UPSTREAM_KEY"}, {"headers": {"api-key": "azure-secret"}}]


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize(
    "headers",
    [
        {"host": "evil.example"},  # DNS rebinding: the page's own name resolves to 127.0.0.1
        {"host": "evil.example:8080"},
        {"origin": "https://evil.example"},  # a cross-site text/plain POST
        {"origin": "null"},
    ],
)
def test_a_browser_page_cannot_spend_the_proxys_key(
    held: dict[str, Any], headers: dict[str, str], capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**passthrough(capture, **held))
    status, raw = proxy.raw(
        "POST", "/v1/chat/completions", {"content-type": "text/plain", **headers}, BODY
    )
    assert status == 403, raw
    assert orjson.loads(raw)["error"]["code"] == "untrusted_caller"
    status, _ = proxy.raw("GET", "/v1/models", headers)
    assert status == 403
    assert capture.seen == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:8080", "[::1]:8080"])
def test_loopback_names_and_sdk_clients_still_go(
    host: str, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**passthrough(capture, api_key_env="UPSTREAM_KEY"))
    status, _ = proxy.raw(
        "POST", "/v1/chat/completions", {"content-type": "application/json", "host": host}, BODY
    )
    assert status == 200
    assert len(capture.seen) == 1


def test_an_operator_may_allow_an_origin_and_a_host(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(
        **passthrough(capture, api_key_env="UPSTREAM_KEY"),
        allowed_origins=["https://app.example"],
        allowed_hosts=["proxy.internal"],
    )
    headers = {"content-type": "application/json", "origin": "https://app.example"}
    status, _ = proxy.raw(
        "POST", "/v1/chat/completions", {**headers, "host": "proxy.internal"}, BODY
    )
    assert status == 200
    status, _ = proxy.raw("POST", "/v1/chat/completions", {**headers, "host": "127.0.0.1"}, BODY)
    assert status == 403  # allowed_hosts replaces the loopback default


def test_without_a_held_key_a_browser_spends_only_its_own(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**passthrough(capture))
    headers = {"content-type": "application/json", "origin": "https://evil.example"}
    status, _ = proxy.raw("POST", "/v1/chat/completions", headers, BODY)
    assert status == 200  # nothing of the operator's is spent: the caller's own credential


def test_a_key_in_headers_is_a_held_key_for_forwarded_paths(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**passthrough(capture, headers={"api-key": "azure-secret"}))
    status, raw = proxy.raw("GET", "/v1/files", {})
    assert status == 403, raw
    assert capture.seen == []


def test_a_key_in_headers_trips_the_open_proxy_check(capture: Capture) -> None:
    from proxy.config.settings import load_settings

    settings = load_settings(None, host="0.0.0.0", **passthrough(capture, headers={"api-key": "s"}))
    assert settings.exposure_problem() is not None
