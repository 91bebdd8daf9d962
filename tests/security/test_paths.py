"""Path traversal: nothing outside /v1 of the upstream's base URL is reachable, and no spelling
of the chat path reaches the upstream's chat endpoint without being fitted."""

from __future__ import annotations

import orjson
import pytest

from proxy.paths import unsafe_reason
from tests.security.conftest import TEAM_KEY, Capture, ProxyFactory, chat_body, keys_config

ATTACKS = [
    "/v1/../admin/stats",
    "/v1/%2e%2e/admin/stats",
    "/v1/%2E%2E/api/delete",
    "/v1/.%2e/api/pull",
    "/v1/./models",
    "/v1/embeddings/../../api/delete",
    "/v1/files%2f..%2fadmin",
    "/v1/files%5c..%5cadmin",
    "/v1//chat/completions",
    "//v1/chat/completions",
    "/v1/chat//completions",
    "/v1/embeddings/",
    "/v1/a%00b",
]


@pytest.mark.parametrize("path", ATTACKS)
def test_traversal_and_empty_segments_are_refused_before_the_upstream(
    path: str, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    headers = {"authorization": f"Bearer {TEAM_KEY}", "content-type": "application/json"}
    for method in ("GET", "POST"):
        body = orjson.dumps(chat_body()) if method == "POST" else None
        status, raw = proxy.raw(method, path, headers, body)
        assert status == 400, (method, path, raw)
        assert orjson.loads(raw)["error"]["code"] == "invalid_path"
    assert capture.seen == []


def test_a_plain_path_still_goes(capture: Capture, make_proxy: ProxyFactory) -> None:
    proxy = make_proxy(**keys_config(capture))
    headers = {"authorization": f"Bearer {TEAM_KEY}", "content-type": "application/json"}
    body = orjson.dumps({"model": "gpt-4o", "input": "x"})
    status, _ = proxy.raw("POST", "/v1/embeddings", headers, body)
    assert status == 200
    assert capture.paths == [b"/v1/embeddings"]


@pytest.mark.parametrize(
    ("path", "raw", "unsafe"),
    [
        ("/v1/chat/completions", b"/v1/chat/completions", False),
        ("/v1/models/gpt-4o", b"/v1/models/gpt-4o", False),
        ("/v1/files/a.b", b"/v1/files/a.b", False),
        ("/v1/files/...", b"/v1/files/...", False),  # three dots name a file, not a parent
        ("/v1/../x", b"/v1/../x", True),
        ("/v1/../x", b"/v1/%2e%2e/x", True),
        ("/v1/a/b", b"/v1/a%2Fb", True),
        ("/v1/a\\b", b"/v1/a%5cb", True),
        ("/", b"/", False),
    ],
)
def test_unsafe_reason_table(path: str, raw: bytes, unsafe: bool) -> None:
    assert (unsafe_reason(path, raw) is not None) is unsafe


DOUBLE_ENCODED = [
    "/v1/audio/%252e%252e/files",
    "/v1/audio/%252e%252e/%252e%252e/organization/usage",
    "/v1/images/%252E%252E/batches",
    "/v1/audio/x%252fy",
    "/v1/embeddings%253fx=1",
    "/v1/audio/speech%3f/../files",
    "/v1/audio/speech%23frag",
    "/v1/audio/%09speech",
]


@pytest.mark.parametrize("path", DOUBLE_ENCODED)
def test_a_double_encoded_path_never_reaches_another_upstream_path(
    path: str, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    headers = {"authorization": f"Bearer {TEAM_KEY}", "content-type": "application/json"}
    for method in ("GET", "POST"):
        body = orjson.dumps({"model": "gpt-4o", "input": "x"}) if method == "POST" else None
        status, raw = proxy.raw(method, path, headers, body)
        assert status == 400, (method, path, raw)
    assert capture.seen == []


def test_the_upstream_sees_the_checked_path_encoded_once(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """A path segment with characters that need escaping reaches the upstream escaped exactly
    once: the upstream decodes it to the path the proxy checked."""
    proxy = make_proxy(**keys_config(capture))
    headers = {"authorization": f"Bearer {TEAM_KEY}", "content-type": "application/json"}
    body = orjson.dumps({"model": "gpt-4o", "input": "x"})
    status, _ = proxy.raw("POST", "/v1/audio/sp%20eech%C3%A9", headers, body)
    assert status == 200
    assert capture.paths == [b"/v1/audio/sp%20eech%C3%A9"]


def test_a_bad_messages_path_is_refused_in_anthropic_shape(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    headers = {"x-api-key": TEAM_KEY, "content-type": "application/json"}
    status, raw = proxy.raw("POST", "/v1/messages/%2e%2e/x", headers, b"{}")
    assert status == 400
    assert orjson.loads(raw)["type"] == "error"
