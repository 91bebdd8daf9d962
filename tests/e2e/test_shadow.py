"""Shadow mode against a real local upstream: the same conversations sent through an enforcing
team and a shadow team, in each wire format. The shadow team's requests reach the upstream as
the client sent them, byte for byte; its plans, made after, project the saving the enforcing
team made, in tokens and dollars, within one point; no summary is made for them; and an
upstream overflow reaches its client as it came, counted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

import proxy.edge.shadow as shadow_module
from tests.e2e.conftest import MODEL, Stack, StackFactory

PRICES = {  # Anthropic-like: reads at a tenth, 5-minute writes at 1.25x
    "input_cost_per_token": 3e-6,
    "cache_read_input_token_cost": 3e-7,
    "cache_creation_input_token_cost": 3.75e-6,
}
TEAMS = {"enforced": {}, "shadow": {"mode": "shadow"}}
FILLER = "Walk me through the next stage of the data migration and what to check before it. "
TURNS = 30
Write = Callable[[list[tuple[str, str]]], dict[str, Any]]


def chat(turns: list[tuple[str, str]]) -> dict[str, Any]:
    messages = [{"role": "system", "content": "You are a migration assistant."}]
    messages += [{"role": role, "content": text} for role, text in turns]
    return {"model": MODEL, "messages": messages, "max_tokens": 64}


def responses(turns: list[tuple[str, str]]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": "You are a migration assistant."}
    ]
    items += [{"role": role, "content": text} for role, text in turns]
    return {"model": MODEL, "input": items, "max_output_tokens": 64}


def messages(turns: list[tuple[str, str]]) -> dict[str, Any]:
    said = [{"role": role, "content": text} for role, text in turns]
    return {"model": MODEL, "system": "You are a migration assistant.", "messages": said,
            "max_tokens": 64}  # fmt: skip


FORMATS: list[tuple[str, str, Write]] = [
    ("chat", "/v1/chat/completions", chat),
    ("responses", "/v1/responses", responses),
    ("anthropic", "/v1/messages", messages),
]
TIMEOUT = 60  # a first request loads what it needs: seconds on a busy machine
HEADERS = {"authorization": "Bearer sk-test", "anthropic-version": "2023-06-01"}


def conversation() -> list[list[tuple[str, str]]]:
    """Each request's turns: a conversation that grows past the proxy's window, its answers
    fixed (both teams send the same bytes whatever the upstream says)."""
    turns: list[tuple[str, str]] = []
    out = []
    for k in range(TURNS):
        turns.append(("user", f"{k}: {FILLER * 2}"))
        out.append(list(turns))
        turns.append(("assistant", f"Step {k} done: the tables check out. " * 3))
    return out


def post(stack: Stack, path: str, body: bytes, team: str) -> httpx.Response:
    headers = {**HEADERS, "content-type": "application/json", "x-contextwarden-team": team}
    return httpx.post(f"{stack.proxy_url}{path}", content=body, headers=headers, timeout=TIMEOUT)


def stats(stack: Stack, team: str, shadow_requests: int = 0) -> dict[str, Any]:
    """The team's /admin/stats, once its shadow plans (made after the answers) are counted."""
    deadline = time.monotonic() + 30
    while True:
        teams = httpx.get(
            f"{stack.proxy_url}/admin/stats", headers={"authorization": "Bearer admin-key"}
        ).json()["teams"]
        found: dict[str, Any] = teams.get(team, {})
        planned = (found.get("shadow") or {}).get("requests", 0)
        if planned >= shadow_requests or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def shadow_stack(make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Stack:
    monkeypatch.setenv("CW_ADMIN", "admin-key")
    return make_stack(admin_key_env="CW_ADMIN", teams=TEAMS, **kw)


@pytest.mark.parametrize(("fmt", "path", "write"), FORMATS, ids=[f[0] for f in FORMATS])
def test_projected_saving_matches_the_enforced_one(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, fmt: str, path: str, write: Write
) -> None:
    # The upstream takes far more than the proxy fits to: the shadow team's untrimmed
    # requests are answered, as the enforced team's trimmed ones are.
    models = {MODEL: {"context_window": 1200, "tokenizer": "o200k_base", "prices": PRICES}}
    apis = ["chat_completions", "responses", "messages"]
    stack = shadow_stack(
        make_stack, monkeypatch, window=100_000, models=models, summarize=False, apis=apis
    )
    sent: list[bytes] = []
    for turns in conversation():
        body = orjson.dumps(write(turns))
        for team in TEAMS:
            response = post(stack, path, body, team)
            assert response.status_code == 200, response.text
            if team == "shadow":
                sent.append(body)
                assert response.headers["x-contextwarden-actions"] == "shadow"
    # The shadow team's requests went upstream byte for byte (every other one received).
    assert stack.raw[1::2] == sent
    enforced = stats(stack, "enforced")
    shadow = stats(stack, "shadow", TURNS)["shadow"]
    assert enforced["rewritten"] > TURNS // 3  # the conversation outgrew the window early
    assert shadow["requests"] == TURNS and shadow["plan_errors"] == 0
    assert shadow["would_trim"] == enforced["rewritten"], (shadow, enforced)
    saved = enforced["tokens_saved"] / enforced["tokens_before"]
    assert shadow["tokens_before"] == enforced["tokens_before"]
    assert abs(shadow["tokens_saved_share"] - saved) <= 0.01, (shadow, enforced)
    money = enforced["money_saved"] / enforced["cost_as_sent"]
    assert abs(shadow["money_saved"] / shadow["cost_as_sent"] - money) <= 0.01, (shadow, enforced)
    assert shadow["prefix_kept"] == enforced["prefix_kept"], (shadow, enforced)
    assert shadow["prefix_broken"] == enforced["prefix_broken"], (shadow, enforced)
    metrics = httpx.get(f"{stack.proxy_url}/metrics").text
    assert f'contextwarden_shadow_requests_total{{format="{fmt}",team="shadow"}} {TURNS}.0' in (
        metrics
    )
    assert 'contextwarden_tokens_saved_total{team="shadow"}' not in metrics  # none were saved


def test_no_summary_is_made_and_an_overflow_is_passed_on(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Summaries on, from a conversation's first request: the shadow team's plans say they
    would summarize, and the upstream is asked for no summary; past the upstream's own window,
    its refusal reaches the client as it came (no retry), counted."""
    policies = {"default": {"summarizer": {"summarize_unseen": True}}}
    stack = shadow_stack(make_stack, monkeypatch, window=1200, summarize=True, policies=policies)
    caplog.set_level("INFO", logger="contextwarden.access")
    statuses = []
    for turns in conversation():
        body = orjson.dumps(chat(turns))
        response = post(stack, "/v1/chat/completions", body, "shadow")
        statuses.append(response.status_code)
        assert stack.raw[-1] == body  # every one went upstream, once, as sent
        if response.status_code != 200:
            assert response.json()["error"]["code"] == "context_length_exceeded"
            assert response.headers["x-contextwarden-retries"] == "0"
    assert len(stack.raw) == TURNS
    assert stack.upstream_app.state.summaries == []
    overflowed = statuses.count(400)
    assert overflowed > TURNS // 3, statuses
    shadow = stats(stack, "shadow", TURNS)["shadow"]
    assert shadow["upstream_overflows"] == overflowed
    assert shadow["would_summarize"] > 0 and shadow["plan_errors"] == 0, shadow
    lines = [orjson.loads(r.getMessage()) for r in caplog.records if r.name.endswith("access")]
    planned = [line for line in lines if line.get("shadow")]
    assert len(planned) == TURNS
    assert any("summarize" in line["actions"] for line in planned)
    assert all(line["actions"] == ["shadow"] for line in lines if not line.get("shadow"))


def test_a_shadow_allowance_makes_summaries(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``shadow_summarizer_calls_per_hour``, the shadow plans make real summaries, up to
    it."""
    teams = {"shadow": {"mode": "shadow", "shadow_summarizer_calls_per_hour": 1}}
    monkeypatch.setenv("CW_ADMIN", "admin-key")
    policies = {"default": {"summarizer": {"summarize_unseen": True}}}
    stack = make_stack(
        window=100_000,
        proxy_window=1200,
        summarize=True,
        policies=policies,
        teams=teams,
        admin_key_env="CW_ADMIN",
    )
    for turns in conversation():
        response = post(stack, "/v1/chat/completions", orjson.dumps(chat(turns)), "shadow")
        assert response.status_code == 200
    shadow = stats(stack, "shadow", TURNS)["shadow"]
    assert len(stack.upstream_app.state.summaries) == 1  # the allowance, and no more
    assert shadow["would_summarize"] > 0 and shadow["plan_errors"] == 0, shadow
    assert len(stack.raw) == TURNS  # the client's requests, untouched


def test_a_failed_shadow_plan_is_logged_and_counted(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A shadow plan that raises leaves the client's answer as the upstream gave it."""

    def broken(*args: Any) -> Any:
        raise RuntimeError("planner broke")

    monkeypatch.setattr(shadow_module, "fitting_for", broken)
    stack = shadow_stack(make_stack, monkeypatch, window=100_000, proxy_window=1200)
    body = orjson.dumps(chat(conversation()[-1]))
    response = post(stack, "/v1/chat/completions", body, "shadow")
    assert response.status_code == 200 and stack.raw == [body]
    assert response.json()["choices"][0]["message"]["content"]
    deadline = time.monotonic() + 30
    while stats(stack, "shadow").get("shadow") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stats(stack, "shadow")["shadow"]["plan_errors"] == 1
    assert "a shadow plan failed" in caplog.text
    assert (
        'contextwarden_shadow_plan_errors_total{team="shadow"} 1.0'
        in httpx.get(f"{stack.proxy_url}/metrics").text
    )


def test_a_request_the_proxy_would_refuse_is_recorded_as_such(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instructions larger than the proxy's window: the enforcing team is refused, the shadow
    team's request is answered by the upstream, and its plan says ``would-refuse``."""
    stack = shadow_stack(make_stack, monkeypatch, window=100_000, proxy_window=1200)
    body = chat([("user", "Go on.")])
    body["messages"][0]["content"] = FILLER * 200  # about 3,000 tokens of instructions
    statuses = {}
    for team in TEAMS:
        response = post(stack, "/v1/chat/completions", orjson.dumps(body), team)
        statuses[team] = response.status_code
    assert statuses == {"enforced": 400, "shadow": 200}
    shadow = stats(stack, "shadow", 1)["shadow"]
    assert shadow["would_refuse"] == 1 and shadow["plan_errors"] == 0, shadow
    assert shadow["tokens_before"] == 0  # no plan: nothing it would have forwarded


def test_a_policy_in_shadow_mode_and_a_team_that_enforces_it(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mode`` on a policy puts its requests in shadow mode; a team's own ``mode`` comes
    first."""
    policies = {"default": {}, "trial": {"mode": "shadow"}}
    teams = {"t": {"policy": "trial"}, "e": {"policy": "trial", "mode": "enforce"}}
    monkeypatch.setenv("CW_ADMIN", "admin-key")
    stack = make_stack(
        window=100_000, proxy_window=1200, policies=policies, teams=teams, admin_key_env="CW_ADMIN"
    )
    body = orjson.dumps(chat(conversation()[-1]))
    actions = {}
    for team in teams:
        response = post(stack, "/v1/chat/completions", body, team)
        assert response.status_code == 200
        actions[team] = response.headers["x-contextwarden-actions"]
    assert actions["t"] == "shadow" and actions["e"] != "shadow", actions
    assert stack.raw[0] == body and stack.raw[1] != body
    assert stats(stack, "t", 1)["shadow"]["would_trim"] == 1
