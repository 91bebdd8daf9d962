"""Every fresh cut carries the ledger of what it removed, however deep it went
(proxy/request/planning/ledger.py): an agent's steps resent whole as they grow, the way the
openai-agents SDK sends them over Responses and chat completions, at a 32k window.

The room a cut keeps for its ledger is priced on the messages it is expected to remove; a cut
that went deeper (a fresh cut aims well under the budget, so that the next requests replay it)
removed more, and their ledger was longer than that room: it was dropped whole, with more than
20,000 tokens of the budget free (the first and every fourth cut of bench.agents' 32k runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream

WINDOW = 32_000
TASK = "read the step files in order"


def output(k: int) -> str:
    return "".join(
        f"step {k} line {i}: the quick brown fox {i * k} jumps over {k} lazy dogs near river {i}\n"
        for i in range(120)
    )


def responses_body(steps: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for k in range(1, steps + 1):
        call = f"call_{k:04d}"
        args = orjson.dumps({"path": f"step-{k:02d}.txt"}).decode()
        items += [
            {"type": "function_call", "call_id": call, "name": "read_file", "arguments": args},
            {"type": "function_call_output", "call_id": call, "output": output(k)},
        ]
    return {"model": "gpt-4.1", "instructions": "You are a coding agent.", "input": items}


def chat_body(steps: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": TASK},
    ]
    for k in range(1, steps + 1):
        call = f"call_{k:04d}"
        args = orjson.dumps({"path": f"step-{k:02d}.txt"}).decode()
        function = {"name": "read_file", "arguments": args}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function", "function": function}
            ]},
            {"role": "tool", "tool_call_id": call, "content": output(k)},
        ]  # fmt: skip
    return {"model": "gpt-4.1", "messages": messages}


@pytest.mark.parametrize(
    ("path", "body"), [("/v1/responses", responses_body), ("/v1/chat/completions", chat_body)]
)
def test_every_fresh_cut_carries_its_ledger(tmp_path: Path, path: str, body: Any) -> None:
    config = {
        "upstreams": {"demo": {"base_url": "http://placeholder/v1"}},
        "data_dir": str(tmp_path),
        "models": {"gpt-4.1": {"context_window": WINDOW}},
    }
    with BackgroundServer(create_upstream(window=WINDOW)) as upstream:
        config["upstreams"] = {"demo": {"base_url": f"{upstream.url}/v1"}}
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            cuts = []
            for steps in range(1, 25):
                answer = httpx.post(f"{proxy.url}{path}", json=body(steps), timeout=60)
                assert answer.status_code == 200, answer.text
                actions = answer.headers["x-contextwarden-actions"].split(",")
                if "truncate_oldest" in actions and "sticky" not in actions:
                    cuts.append((steps, actions))
    assert len(cuts) >= 2, cuts  # the first cut and a later one, past its replays
    for steps, actions in cuts:
        assert "ledger" in actions, (steps, actions)
