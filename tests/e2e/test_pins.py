"""Pinned instructions survive every compaction: a user's rule, marked in the body or pinned by
header once, reaches the upstream byte-identical in every request, and never goes into a
summary."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.conftest import MODEL, StackFactory

FILLER = "Explain the next part of the deployment runbook and its failure modes. "
RULE = "RULE: answer in French, and never suggest deleting the production database."


@pytest.mark.parametrize("how", ["marker", "header"])
def test_a_pinned_rule_arrives_verbatim_in_every_request(
    make_stack: StackFactory, how: str
) -> None:
    stack = make_stack(window=1536, summarize=True)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an ops assistant."}]
    rule: dict[str, Any] = {"role": "user", "content": RULE}
    for turn in range(40):
        headers = {}
        if turn == 0:
            message = {**rule, "contextwarden": {"pin": True}} if how == "marker" else rule
            messages.append(message)
            if how == "header":
                headers["x-contextwarden-pin-last"] = "1"
        else:
            messages.append({"role": "user", "content": f"{turn}: " + FILLER})
        response = httpx.post(
            f"{stack.proxy_url}/v1/chat/completions",
            json={"model": MODEL, "messages": messages, "max_tokens": 64},
            headers={"authorization": "Bearer sk-test", **headers},
        )
        assert response.status_code == 200, response.text
        answer = response.json()["choices"][0]["message"]["content"]
        messages.append({"role": "assistant", "content": answer})
    assert stack.upstream_app.state.summaries  # the conversation was summarized
    for payload in stack.received:
        assert orjson.dumps(rule) in orjson.dumps(payload["messages"])  # byte-identical
        assert all("contextwarden" not in m for m in payload["messages"])
    for summary_request in stack.upstream_app.state.summaries:
        assert RULE not in orjson.dumps(summary_request).decode()


def test_a_bad_pin_marker_is_a_400(make_stack: StackFactory) -> None:
    stack = make_stack()
    response = httpx.post(
        f"{stack.proxy_url}/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "x", "contextwarden": {"pin": "yes"}}],
        },
        headers={"authorization": "Bearer sk-test"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages[0].contextwarden"


def test_file_lists_are_carried_across_successive_summary_updates(make_stack: StackFactory) -> None:
    """Files read early in a long agent session are still listed after many summary updates."""
    stack = make_stack(window=1536, summarize=True)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    checkpoints: list[str] = []
    for turn in range(40):
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/mod{turn}.py"}}'},
        }
        messages += [
            {"role": "user", "content": f"{turn}: look at module {turn}. " + FILLER},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": "def f(): pass\n" * 20},
        ]
        raw = stack.client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, max_tokens=64
        )
        header = raw.headers.get("x-contextwarden-checkpoint")
        if header and header.split()[1] not in checkpoints:
            checkpoints.append(header.split()[1])
        messages.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    assert len(checkpoints) >= 5  # five and more successive updates
    summary = next(
        m["content"] for m in stack.received[-1]["messages"] if "<read-files>" in str(m["content"])
    )
    listed = summary.split("<read-files>")[1].split("</read-files>")[0].split()
    summarized = [f"src/mod{k}.py" for k in range(10)]  # the earliest turns, summarized first
    assert set(summarized) <= set(listed)
