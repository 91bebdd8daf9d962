"""A stored response belongs to the team it was answered to, and a team with a context cap
cannot step around it through server-side history."""

from __future__ import annotations

from typing import Any

import orjson
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
