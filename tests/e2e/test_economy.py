"""Trimming for the bill and for the rules, measured over long conversations with summaries on:
a 150-turn chat and a 60-turn agent tool loop. After the first trim the forwarded prompt keeps
the previous one as its prefix in at least 90% of requests, a pinned rule arrives byte-identical
in every request, and the estimated cost with trimming is below forwarding untrimmed (as if the
window allowed it)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.conftest import MODEL, StackFactory

PRICES = {  # Anthropic-like: reads at a tenth, 5-minute writes at 1.25x
    "input_cost_per_token": 3e-6,
    "cache_read_input_token_cost": 3e-7,
    "cache_creation_input_token_cost": 3.75e-6,
}
RULE = {"role": "user", "content": "RULE: keep every answer under fifty words."}
FILLER = "Walk me through the next stage of the data migration and what to check. "


def run(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, agent: bool, window: int
) -> None:
    monkeypatch.setenv("CW_ADMIN", "admin-key")
    models = {MODEL: {"context_window": window, "tokenizer": "o200k_base", "prices": PRICES}}
    stack = make_stack(window=window, models=models, summarize=True, admin_key_env="CW_ADMIN")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a migration assistant."},
        {**RULE, "contextwarden": {"pin": True}},
        {"role": "assistant", "content": "Understood."},
    ]
    states, actions, checkpoints = [], [], []
    for turn in range(60 if agent else 150):
        messages.append({"role": "user", "content": f"{turn}: " + FILLER})
        if agent:
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "m{turn}.sql"}}'},
            }
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"call_{turn}", "content": "SELECT 1;\n" * 30},
            ]
        response = httpx.post(
            f"{stack.proxy_url}/v1/chat/completions",
            json={"model": MODEL, "messages": messages, "max_tokens": 64},
            headers={"authorization": "Bearer sk-test"},
        )
        assert response.status_code == 200, response.text
        states.append(response.headers["x-contextwarden-prefix"])
        actions.append(response.headers["x-contextwarden-actions"])
        header = response.headers.get("x-contextwarden-checkpoint")
        checkpoints.append(header.split()[-1] if header else "")
        answer = response.json()["choices"][0]["message"]["content"]
        messages.append({"role": "assistant", "content": answer})
    assert stack.upstream_app.state.summaries  # summaries were on and used
    first = next(k for k, a in enumerate(actions) if a != "none")
    after = states[first + 1 :]
    kept = after.count("kept") / len(after)
    assert kept >= 0.9, (kept, after)
    # Byte-stable checkpoints: between two checkpoint updates, every request keeps the previous
    # forwarded prompt as its prefix (the reused summary is the same bytes in the same place).
    same = [
        k for k in range(1, len(states)) if checkpoints[k] and checkpoints[k] == checkpoints[k - 1]
    ]
    assert same
    assert sum(states[k] == "kept" for k in same) / len(same) >= 0.95, [states[k] for k in same]
    for payload in stack.received:
        assert orjson.dumps(RULE) in orjson.dumps(payload["messages"])
    stats = httpx.get(
        f"{stack.proxy_url}/admin/stats", headers={"authorization": "Bearer admin-key"}
    ).json()["teams"]["default"]
    assert stats["cost_as_forwarded"] < stats["cost_as_sent"], stats


@pytest.mark.slow
def test_a_150_turn_chat(make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    run(make_stack, monkeypatch, agent=False, window=4096)


@pytest.mark.slow
def test_a_60_turn_agent_tool_loop(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tool results make each turn three times a chat turn's size: a window to match.
    run(make_stack, monkeypatch, agent=True, window=8192)
