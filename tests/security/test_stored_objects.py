"""A stored response belongs to the team it was answered to, and a team with a context cap
cannot step around it through server-side history."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.responses import Response

from tests.security.conftest import OTHER_KEY, TEAM_KEY, Capture, ProxyFactory, Seen, keys_config


def stored_response(seen: Seen) -> Response:
    body = {"id": "resp_abc123", "object": "response", "status": "completed", "output": []}
    return Response(orjson.dumps(body), media_type="application/json")


def ask(proxy: Any, key: str, **extra: Any) -> Any:
    with proxy.client(key) as c:
        return c.post("/v1/responses", json={"model": "gpt-4o", "input": "hi", **extra})


def test_another_team_cannot_continue_a_teams_stored_response(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = stored_response
    proxy = make_proxy(**keys_config(capture))
    assert ask(proxy, TEAM_KEY).status_code == 200  # team limited makes resp_abc123
    stolen = ask(proxy, OTHER_KEY, previous_response_id="resp_abc123")
    assert stolen.status_code == 403
    assert stolen.json()["error"]["code"] == "not_your_object"
    assert ask(proxy, TEAM_KEY, previous_response_id="resp_abc123").status_code == 200
    assert len(capture.seen) == 2


def test_a_capped_team_cannot_send_a_stateful_request(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    config = keys_config(capture)
    config["teams"]["other"]["max_context_tokens"] = 2000
    proxy = make_proxy(**config)
    for stateful in ({"previous_response_id": "resp_x"}, {"conversation": "conv_x"}):
        answer = ask(proxy, OTHER_KEY, **stateful)
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "stateful_not_allowed"
    assert capture.seen == []


def response_with_items(seen: Seen) -> Response:
    """A stored response whose output items have ids of their own."""
    body = {
        "id": "resp_abc123",
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_secret0001", "summary": []},
            {"type": "message", "id": "msg_secret0001", "role": "assistant", "content": []},
        ],
    }
    return Response(orjson.dumps(body), media_type="application/json")


def streamed_items(seen: Seen) -> Response:
    events = [
        {"type": "response.created", "response": {"id": "resp_str123456", "output": []}},
        {
            "type": "response.output_item.added",
            "item": {"type": "message", "id": "msg_stream00001"},
        },
        {"type": "response.completed", "response": {"id": "resp_str123456"}},
    ]
    raw = b"".join(
        b"event: %s\ndata: %s\n\n" % (e["type"].encode(), orjson.dumps(e)) for e in events
    )
    return Response(raw, media_type="text/event-stream")


def reference(item_id: str) -> dict[str, Any]:
    return {"input": [{"type": "item_reference", "id": item_id}, {"role": "user", "content": "go"}]}


def test_another_teams_items_cannot_be_referenced(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """R9: item_reference pulled another team's stored item into a request."""
    capture.answer = response_with_items
    proxy = make_proxy(**keys_config(capture))
    assert ask(proxy, TEAM_KEY).status_code == 200  # team limited makes the items
    for item in ("msg_secret0001", "rs_secret0001"):
        with proxy.client(OTHER_KEY) as c:
            stolen = c.post("/v1/responses", json={"model": "gpt-4o", **reference(item)})
        assert stolen.status_code == 403, stolen.text
        assert stolen.json()["error"]["code"] == "not_your_object"
    with proxy.client(TEAM_KEY) as c:
        own = c.post("/v1/responses", json={"model": "gpt-4o", **reference("msg_secret0001")})
    assert own.status_code == 200
    assert len(capture.seen) == 2


def test_a_streamed_answers_items_are_claimed_too(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = streamed_items
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(TEAM_KEY) as c:
        streamed = c.post("/v1/responses", json={"model": "gpt-4o", "input": "hi", "stream": True})
    assert streamed.status_code == 200 and b"msg_stream00001" in streamed.content
    with proxy.client(OTHER_KEY) as c:
        stolen = c.post("/v1/responses", json={"model": "gpt-4o", **reference("msg_stream00001")})
    assert stolen.status_code == 403, stolen.text


def test_input_tokens_of_another_teams_response_are_refused(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """R9: /v1/responses/input_tokens (forwarded by default) counted another team's stored
    conversation."""
    capture.answer = stored_response
    proxy = make_proxy(**keys_config(capture))
    assert ask(proxy, TEAM_KEY).status_code == 200
    capture.answer = None
    large = {"previous_response_id": "resp_abc123", "instructions": "x" * 2_000_000}
    for body in ({"previous_response_id": "resp_abc123"}, reference("resp_abc123"), large):
        with proxy.client(OTHER_KEY) as c:
            answer = c.post("/v1/responses/input_tokens", json={"model": "gpt-4o", **body})
        assert answer.status_code == 403, answer.text
    with proxy.client(TEAM_KEY) as c:
        own = c.post(
            "/v1/responses/input_tokens",
            json={"model": "gpt-4o", "previous_response_id": "resp_abc123"},
        )
    assert own.status_code == 200
    assert len(capture.seen) == 2


def test_a_forwarded_path_that_names_another_teams_object_is_refused(
    capture: Capture, make_proxy: ProxyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the operator forwards stored-object paths, the id in the path is checked."""
    monkeypatch.setenv("THIEF_KEY", "cw-thief-1212")
    capture.answer = response_with_items
    config = keys_config(capture, forward_paths=["responses", "responses/*"])
    config["teams"]["thief"] = {"key_envs": ["THIEF_KEY"]}
    proxy = make_proxy(**config)
    assert ask(proxy, OTHER_KEY).status_code == 200
    capture.answer = None
    for path in ("/v1/responses/resp_abc123", "/v1/responses/resp_abc123/input_items"):
        with proxy.client("cw-thief-1212") as c:
            assert c.get(path).status_code == 403
        with proxy.client(OTHER_KEY) as c:
            assert c.get(path).status_code == 200
    assert len(capture.seen) == 3


def test_a_capped_team_cannot_reference_items_either(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    config = keys_config(capture)
    config["teams"]["other"]["max_context_tokens"] = 2000
    proxy = make_proxy(**config)
    with proxy.client(OTHER_KEY) as c:
        answer = c.post("/v1/responses", json={"model": "gpt-4o", **reference("msg_x0000001")})
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "stateful_not_allowed"
    assert capture.seen == []
