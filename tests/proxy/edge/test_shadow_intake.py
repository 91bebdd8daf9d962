"""Shadow mode forwards a request once it is read and checked, and makes its view and plan
after the answer (proxy/edge/shadow.py): whatever enforce mode refuses as bad input or as not
allowed (400, 403, 413, in the client's format), shadow mode refuses the same way, without
forwarding it; what enforce mode would forward, or refuse only for not fitting, shadow mode
forwards as it came."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import respx
from hypothesis import HealthCheck, given, settings

from proxy.errors import ContextTooLarge
from tests.proxy.edge.test_bad_input import CASES, messy_body, near_valid_body
from tests.proxy.formats.test_anthropic_http import CASES as MESSAGES_CASES
from tests.proxy.upstreams.test_forwarding import BASE, OK, config_with, running

TEAMS = {
    "enforced": {},
    "shadow": {"mode": "shadow"},
    "limited": {"mode": "shadow", "models": ["other"]},
}
APIS = ["chat_completions", "responses", "messages"]
ANTHROPIC_OK = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": "small", "stop_reason": "end_turn",
                "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip


def config(monkeypatch: Any) -> dict[str, Any]:
    cfg = config_with(monkeypatch, teams=TEAMS, limits={"max_body_bytes": 200_000})
    cfg["upstreams"]["demo"]["apis"] = APIS
    return cfg


async def post(client: httpx.AsyncClient, path: str, body: bytes, team: str) -> httpx.Response:
    headers = {"x-contextwarden-team": team, "content-type": "application/json"}
    return await client.post(path, content=body, headers=headers)


def error_code(response: httpx.Response) -> Any:
    """The error's code, in OpenAI's shape or Anthropic's (its type)."""
    error = orjson.loads(response.content)["error"]
    return error.get("code") or error.get("type")


@respx.mock
async def test_bad_input_and_what_a_team_may_not_do_are_refused_as_when_enforced(
    monkeypatch: Any,
) -> None:
    chat = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    messages = respx.post(f"{BASE}/messages").mock(
        return_value=httpx.Response(200, json=ANTHROPIC_OK)
    )
    async with running(config(monkeypatch)) as client:
        for path, cases in [
            ("/v1/chat/completions", [body for body, _ in CASES]),
            ("/v1/messages", [c.replace(b'"claude-x"', b'"small"') for c in MESSAGES_CASES]),
        ]:
            for body in cases:
                enforced = await post(client, path, body, "enforced")
                assert enforced.status_code in (400, 413), (body, enforced.text)
                if error_code(enforced) == ContextTooLarge.code:
                    continue  # refused for not fitting: shadow mode forwards it (below)
                shadow = await post(client, path, body, "shadow")
                assert shadow.status_code == enforced.status_code, (body, shadow.text)
                assert shadow.content == enforced.content
        assert not chat.called and not messages.called
        # The team's model list, checked before anything is sent.
        good = orjson.dumps({"model": "small", "messages": [{"role": "user", "content": "hi"}]})
        refused = await post(client, "/v1/chat/completions", good, "limited")
        assert refused.status_code == 403 and not chat.called
        # The same request from a team that may send it: forwarded as it came, and planned.
        answered = await post(client, "/v1/chat/completions", good, "shadow")
        assert answered.status_code == 200 and chat.calls.last.request.content == good
        assert answered.headers["x-contextwarden-actions"] == "shadow"
        planned = 'contextwarden_shadow_requests_total{format="chat",team="shadow"} 1.0'
        for _ in range(200):  # made after the answer
            if planned in (metrics := (await client.get("/metrics")).text):
                break
            await asyncio.sleep(0.01)
        assert planned in metrics


@respx.mock
def test_shadow_mode_refuses_what_enforce_mode_refuses_and_forwards_the_rest(
    monkeypatch: Any,
) -> None:
    """On any body: where the enforcing team is refused before anything is forwarded (and not
    for its size against the window), the shadow team gets the same answer, with nothing
    forwarded; otherwise the shadow team's body goes upstream byte for byte."""
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    loop = asyncio.new_event_loop()
    app = running(config(monkeypatch))
    client = loop.run_until_complete(app.__aenter__())

    def send(body: bytes, team: str) -> httpx.Response:
        return loop.run_until_complete(post(client, "/v1/chat/completions", body, team))

    @settings(
        max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(body=messy_body() | near_valid_body())
    def check(body: bytes) -> None:
        before = route.call_count
        enforced = send(body, "enforced")
        refused = route.call_count == before
        code = error_code(enforced) if refused else None
        before = route.call_count
        shadow = send(body, "shadow")
        if refused and code != ContextTooLarge.code:
            assert shadow.status_code == enforced.status_code, (body, shadow.text)
            assert shadow.content == enforced.content
            assert route.call_count == before
        else:
            assert shadow.status_code == 200, (body, shadow.text)
            assert route.call_count == before + 1
            assert route.calls.last.request.content == body

    try:
        check()
    finally:
        loop.run_until_complete(app.__aexit__(None, None, None))
        loop.close()
