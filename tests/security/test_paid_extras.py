"""Hosted tools and paid options passed a team's model allowlist: a team limited to a cheap
model could still run ``code_interpreter`` or ``web_search`` and ask for ``service_tier:
priority`` or ``background``. A team limited to some models now gets only the ones it lists."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import OTHER_KEY, TEAM_KEY, Capture, ProxyFactory, keys_config

ALL_APIS = ["chat_completions", "responses", "messages"]
CASES = [
    ("/v1/responses", {"input": "hi", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}, "tool_not_allowed"),
    ("/v1/responses", {"input": "hi", "tools": [{"type": "web_search_preview_2025_03_11"}]}, "tool_not_allowed"),
    ("/v1/responses", {"input": "hi", "tools": [{"type": "mcp", "server_label": "x", "server_url": "https://x"}]}, "tool_not_allowed"),
    ("/v1/responses", {"input": "hi", "service_tier": "priority"}, "option_not_allowed"),
    ("/v1/responses", {"input": "hi", "background": True}, "option_not_allowed"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "web_search_options": {}}, "tool_not_allowed"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "service_tier": "priority"}, "option_not_allowed"),
    ("/v1/messages", {"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tool_not_allowed"),
    ("/v1/responses/input_tokens", {"input": "hi", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "tool_not_allowed"),
]  # fmt: skip


def proxy_for(capture: Capture, make_proxy: ProxyFactory, **limited: Any) -> Any:
    config = keys_config(capture)
    config["upstreams"]["main"]["apis"] = ALL_APIS
    config["teams"]["limited"].update(limited)
    return make_proxy(**config)


@pytest.mark.parametrize(("path", "body", "code"), CASES)
def test_a_limited_team_gets_no_hosted_tool_or_paid_option_it_was_not_given(
    path: str, body: dict[str, Any], code: str, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = proxy_for(capture, make_proxy)
    with proxy.client(TEAM_KEY) as c:
        refused = c.post(path, json={"model": "gpt-4o", **body})
    assert refused.status_code == 403, refused.text
    data = refused.json()
    if data.get("type") == "error":  # Anthropic's shape, on /v1/messages
        assert "hosted tool 'web_search'" in data["error"]["message"]
    else:
        assert data["error"]["code"] == code
    with proxy.client(OTHER_KEY) as c:  # a team with any model: anything, as before
        assert c.post(path, json={"model": "gpt-4o", **body}).status_code == 200
    assert len(capture.seen) == 1


def test_a_team_gets_what_its_policy_lists(capture: Capture, make_proxy: ProxyFactory) -> None:
    proxy = proxy_for(capture, make_proxy, hosted_tools=["web_search"], paid_options=["background"])
    allowed = {"input": "hi", "tools": [{"type": "web_search_preview"}], "background": True}
    with proxy.client(TEAM_KEY) as c:
        assert c.post("/v1/responses", json={"model": "gpt-4o", **allowed}).status_code == 200
        other = {"input": "hi", "tools": [{"type": "code_interpreter"}]}
        assert c.post("/v1/responses", json={"model": "gpt-4o", **other}).status_code == 403
        functions = {"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {}}]}
        assert c.post("/v1/responses", json={"model": "gpt-4o", **functions}).status_code == 200
    assert len(capture.seen) == 2


def test_a_team_may_be_closed_to_every_extra(capture: Capture, make_proxy: ProxyFactory) -> None:
    """A team with any model may still be given none: empty lists."""
    config = keys_config(capture)
    config["teams"]["other"].update(hosted_tools=[], paid_options=[])
    proxy = make_proxy(**config)
    with proxy.client(OTHER_KEY) as c:
        body = {"model": "gpt-4o", "input": "hi", "service_tier": "priority"}
        assert c.post("/v1/responses", json=body).status_code == 403
        body = {"model": "gpt-4o", "input": "hi", "service_tier": "flex"}
        assert c.post("/v1/responses", json=body).status_code == 200
