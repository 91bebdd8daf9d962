"""The plan's post-condition (proxy/request/planning/postcondition.py), at the defaults: a plan that
breaks it is never forwarded, the safe plan is, and the fallback is counted; a team's cap is
a hard cap."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import respx

import proxy.request.planning.fit_to_budget as fit_module
import proxy.request.planning.sticky_replay as replay_module
from strategies.engine import Fit, FitRequest
from tests.proxy.upstreams.test_forwarding import BASE, OK, running

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]  # fmt: skip


def config(**extra: Any) -> dict[str, Any]:
    return {
        "upstreams": {"demo": {"base_url": BASE}},
        "default_upstream": "demo",
        "models": {"small": {"context_window": 2048, "tokenizer": "o200k_base"}},
        **extra,
    }


def tool_loop(turns: int) -> list[dict[str, Any]]:
    """One tool call per user turn; the newest turn's call has just been answered."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful. " * 30}]
    for t in range(turns):
        out.append({"role": "user", "content": f"Turn {t}: read file {t}. " + "word " * 30})
        fn = {"name": "read_file", "arguments": f'{{"path": "f{t}"}}'}
        out.append({"role": "assistant", "content": None,
                    "tool_calls": [{"id": f"c{t}", "type": "function", "function": fn}]})  # fmt: skip
        out.append({"role": "tool", "tool_call_id": f"c{t}", "content": "lorem " * 300})
        if t < turns - 1:
            out.append({"role": "assistant", "content": f"Read file {t}."})
    return out


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "small", "messages": messages, "tools": TOOLS}


def breaking(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """The engine's fit made to drop the newest step, its first ``times`` calls: a strategy
    that breaks the post-condition."""
    real, calls = fit_module.fit, [0]

    def fit(request: FitRequest) -> Fit:
        result = real(request)
        calls[0] += 1
        if calls[0] <= times:
            result.messages = [m for m in result.messages if m.get("role") != "tool"]
            result.actions = [*result.actions, "truncate_oldest"]
        return result

    monkeypatch.setattr(fit_module, "fit", fit)
    return calls


@respx.mock
async def test_a_plan_that_drops_the_newest_step_is_replaced_by_the_safe_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    calls = breaking(monkeypatch, times=1)
    messages = tool_loop(4)
    async with running(config(), fallbacks=True) as client:
        got = await client.post("/v1/chat/completions", json=body(messages))
        metrics = (await client.get("/metrics")).text
    assert got.status_code == 200
    assert calls[0] == 2  # the broken plan, then the safe one
    assert "plan-fallback protected" in got.headers["x-contextwarden-actions"]
    sent = orjson.loads(route.calls.last.request.content)["messages"]
    assert sent[-2:] == messages[-2:] and sent[0] == messages[0]
    assert 'contextwarden_plan_fallbacks_total{reason="protected",team="default"} 1.0' in metrics


@respx.mock
async def test_when_even_the_safe_plan_breaks_it_the_request_goes_as_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never worse than no proxy: the client's own bytes go, and the upstream decides."""
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    breaking(monkeypatch, times=10)
    messages = tool_loop(4)
    async with running(config(), fallbacks=True) as client:
        got = await client.post("/v1/chat/completions", json=body(messages))
    assert got.status_code == 200
    assert "plan-fallback protected-unsafe" in got.headers["x-contextwarden-actions"]
    assert orjson.loads(route.calls.last.request.content)["messages"] == messages


@respx.mock
async def test_a_sticky_replay_that_breaks_a_pair_is_never_forwarded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    real = replay_module.replay

    def replay(*args: Any) -> list[Any] | None:
        made = real(*args)  # with every result but the newest gone: broken pairs
        return None if made is None else [*(m for m in made[:-1] if m["role"] != "tool"), made[-1]]

    monkeypatch.setattr(replay_module, "replay", replay)
    messages = tool_loop(4)
    async with running(config(), fallbacks=True) as client:
        first = await client.post("/v1/chat/completions", json=body(messages))
        assert "plan-fallback" not in first.headers["x-contextwarden-actions"]
        messages += [{"role": "assistant", "content": "Read file 3."}]
        messages += tool_loop(5)[-4:-1]
        messages.append({"role": "tool", "tool_call_id": "c4", "content": "lorem " * 300})
        got = await client.post("/v1/chat/completions", json=body(messages))
    actions = got.headers["x-contextwarden-actions"]
    assert "plan-fallback" in actions and "sticky" not in actions, actions
    sent = orjson.loads(route.calls.last.request.content)["messages"]
    assert sent[-2:] == messages[-2:]


STREAM = b'data: {"choices": [{"index": 0, "delta": {"content": "ok"}}]}\n\ndata: [DONE]\n\n'


@pytest.mark.parametrize("stream", [False, True])
@respx.mock
async def test_the_chat_tool_loop_keeps_its_newest_step_on_every_fresh_cut(stream: bool) -> None:
    """The issue's first case, at the defaults: 30 turns of one call each at a 2,048 window,
    streamed and not; every forwarded request ends with the newest tool result, byte for
    byte."""
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(orjson.loads(request.content))
        if stream:
            return httpx.Response(
                200, content=STREAM, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=OK)

    respx.post(f"{BASE}/chat/completions").mock(side_effect=answer)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful. " * 30}]
    async with running(config()) as client:
        for t in range(30):
            messages.append({"role": "user", "content": f"Turn {t}: read file {t}. " + "w " * 30})
            fn = {"name": "read_file", "arguments": f'{{"path": "f{t}"}}'}
            messages.append({"role": "assistant", "content": None,
                             "tool_calls": [{"id": f"c{t}", "type": "function", "function": fn}]})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": "lorem " * 300})
            got = await client.post(
                "/v1/chat/completions", json={**body(messages), "stream": stream}
            )
            assert got.status_code == 200
            assert "plan-fallback" not in got.headers["x-contextwarden-actions"]
            assert seen[-1]["messages"][-3:] == messages[-3:], (t, got.headers)
            messages.append({"role": "assistant", "content": f"Read file {t}."})


@respx.mock
async def test_a_team_cap_is_a_hard_cap_for_an_estimated_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The estimate's known error lets an estimated request past the window, never past the
    team's ``max_context_tokens``: the request is refused, not sent over the cap."""
    monkeypatch.setenv("TEAM_KEY", "cw-team-key-0000")
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    cfg = config(
        auth="keys",
        teams={"t": {"key_envs": ["TEAM_KEY"], "max_context_tokens": 4000}},
        models={"guess": {"context_window": 100_000, "tokenizer": "estimate"}},
    )
    turn = {"role": "user", "content": "Follow the style and read files first. " * 480}
    headers = {"authorization": "Bearer cw-team-key-0000"}
    async with running(cfg) as client:
        got = await client.post(
            "/v1/chat/completions",
            json={"model": "guess", "messages": [turn], "max_tokens": 64},
            headers=headers,
        )
    assert got.status_code == 400, got.text
    assert not route.called


CALLER = {"authorization": "Bearer sk-agent"}


@respx.mock
async def test_a_running_task_with_large_tool_definitions_gets_deep_cuts() -> None:
    """The deep cut compares this prompt with the last one like with like (tool definitions
    in both): with 2,000 tokens of tools, every cut used to be a plain one, and every other
    request of a growing task was cut afresh, breaking the cached prefix."""
    respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    tools = [{"type": "function", "function": {"name": f"tool_{k}", "description": "Do. " * 60,
              "parameters": {"type": "object", "properties": {}}}} for k in range(8)]  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    messages.append({"role": "user", "content": "Read every file."})
    states = []
    async with running(config(models={"small": {"context_window": 12_000}})) as client:
        for t in range(40):
            fn = {"name": "tool_0", "arguments": f'{{"n": {t}}}'}
            messages.append({"role": "assistant", "content": None,
                             "tool_calls": [{"id": f"c{t}", "type": "function", "function": fn}]})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": "data " * 1500})
            got = await client.post(
                "/v1/chat/completions",
                json={"model": "small", "messages": messages, "tools": tools},
                headers=CALLER,  # the prefix state is told only to a caller with a key
            )
            assert got.status_code == 200
            if got.headers["x-contextwarden-actions"] != "none":
                states.append(got.headers["x-contextwarden-prefix"])
    assert states.count("kept") >= 0.65 * len(states), states
