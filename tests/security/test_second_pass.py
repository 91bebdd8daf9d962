"""The second red-team pass's lower findings, each against a real loopback proxy: bodies that
reached a 500, controls ignored on /v1/completions, models named where the allowlist did not
look, and duplicate keys on forwarded paths."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.security.conftest import OTHER_KEY, TEAM_KEY, Capture, ProxyFactory, keys_config

ALL_APIS = {"apis": ["chat_completions", "responses", "messages"]}


def config(capture: Capture, **extra: Any) -> dict[str, Any]:
    base = keys_config(capture, **extra)
    base["upstreams"]["main"].update(ALL_APIS)
    return base


def post(proxy: Any, key: str, path: str, body: dict[str, Any] | bytes) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    status, answer = proxy.raw("POST", path, headers, raw)
    return status, orjson.loads(answer) if answer.startswith(b"{") else answer


MESSAGES_USER = [{"role": "user", "content": "hi"}]
EXTREMES = [
    ("/v1/responses", {"model": "gpt-4o", "input": "hi", "tools": [{"type": "function", "function": None}]}),
    ("/v1/messages", {"model": "gpt-4o", "max_tokens": 8, "messages": MESSAGES_USER, "tools": [{"name": "x", "function": None}]}),
    ("/v1/chat/completions", {"model": "gpt-4o", "messages": [{"role": "user", "content": " " * 1_000_000}]}),
    ("/v1/responses", {"model": "gpt-4o", "input": " " * 1_000_000}),
    ("/v1/messages", {"model": "gpt-4o", "max_tokens": 8, "messages": [{"role": "user", "content": "\n" * 1_000_000}]}),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body"), EXTREMES)
def test_hostile_extremes_get_an_answer_never_a_500(
    path: str, body: dict[str, Any], capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**config(capture))
    status, answer = post(proxy, OTHER_KEY, path, body)
    assert status < 500, answer
    assert isinstance(answer, dict)  # an error in the client's shape, never plain text


def test_a_hosted_tool_cannot_name_a_model_the_team_may_not_use(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    base = config(capture)
    base["teams"]["limited"]["hosted_tools"] = ["image_generation"]  # the tool, not its model
    proxy = make_proxy(**base)
    tool = {"type": "image_generation", "model": "gpt-image-1"}
    status, answer = post(
        proxy, TEAM_KEY, "/v1/responses", {"model": "gpt-4o", "input": "draw", "tools": [tool]}
    )
    assert status == 403, answer
    assert answer["error"]["param"] == "tools[0].model"
    status, _ = post(
        proxy, OTHER_KEY, "/v1/responses", {"model": "gpt-4o", "input": "draw", "tools": [tool]}
    )
    assert status == 200  # a team with no model limits may
    assert len(capture.seen) == 1


def test_a_duplicate_model_on_a_forwarded_path_is_refused(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**config(capture))
    body = b'{"model": "gpt-4o-mini", "input": "x", "model": "gpt-4o"}'
    status, _ = post(proxy, TEAM_KEY, "/v1/embeddings", body)
    assert status == 400
    assert capture.seen == []


@pytest.mark.parametrize(
    ("controls", "status"),
    [
        ({"policy": "nope"}, 400),
        ({"trim": False}, 403),
        ({"session_memory": "x"}, 403),
        ({"bogus": 1}, 400),
    ],
)
def test_completions_refuses_a_bad_control_instead_of_ignoring_it(
    controls: dict[str, Any], status: int, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**config(capture))
    body = {"model": "gpt-4o", "prompt": "hi", "contextwarden": controls}
    got, answer = post(proxy, OTHER_KEY, "/v1/completions", body)
    assert got == status, answer
    assert capture.seen == []
