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


CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000}
MESSAGES = {"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
MULTIPLIED = [
    ("/v1/chat/completions", {**CHAT, "n": 128}, "n"),  # the finding: 128 answers billed
    ("/v1/chat/completions", {**CHAT, "n": "128"}, "n"),  # a count the upstream may coerce
    ("/v1/chat/completions", {**CHAT, "service_tier": "fast"}, "priority"),  # served as priority
    ("/v1/completions", {"prompt": "hi", "n": 16}, "n"),
    ("/v1/completions", {"prompt": "hi", "best_of": 20}, "best_of"),
    ("/v1/images/generations", {"prompt": "a cat", "n": 10}, "n"),  # a forwarded path
    ("/v1/messages", {**MESSAGES, "speed": "fast"}, "fast"),
    ("/v1/messages", {**MESSAGES, "inference_geo": "us"}, "inference_geo"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "option"), MULTIPLIED)
def test_a_multiplier_of_the_bill_is_a_paid_option(
    path: str, body: dict[str, Any], option: str, capture: Capture, make_proxy: ProxyFactory
) -> None:
    """A team limited to some models and no paid option was forwarded ``n: 128, max_tokens:
    4000`` (#55, F9): every field that multiplies what one request bills is refused with 403
    ``option_not_allowed``, in the client's own format, until the team's policy lists it."""
    proxy = proxy_for(capture, make_proxy)
    with proxy.client(TEAM_KEY) as c:
        refused = c.post(path, json={"model": "gpt-4o", **body})
    assert refused.status_code == 403, refused.text
    data = refused.json()
    if path == "/v1/messages":
        assert data["type"] == "error" and data["error"]["type"] == "permission_error"
    else:
        assert data["error"]["code"] == "option_not_allowed"
        assert data["error"]["param"] == next(k for k in body if k not in CHAT and k != "prompt")
    assert f"paid option {option!r}" in data["error"]["message"]
    assert capture.seen == []
    allowed = proxy_for(capture, make_proxy, paid_options=[option])
    with allowed.client(TEAM_KEY) as c:
        assert c.post(path, json={"model": "gpt-4o", **body}).status_code == 200
    assert len(capture.seen) == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {**CHAT, "n": 1, "top_logprobs": 5, "logprobs": True}),
        ("/v1/completions", {"prompt": "hi", "n": None, "best_of": 1}),
        ("/v1/messages", {**MESSAGES, "speed": "standard", "inference_geo": "global"}),
    ],
)
def test_one_answer_at_the_usual_rate_is_no_paid_option(
    path: str, body: dict[str, Any], capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = proxy_for(capture, make_proxy)
    with proxy.client(TEAM_KEY) as c:
        assert c.post(path, json={"model": "gpt-4o", **body}).status_code == 200
    assert len(capture.seen) == 1
