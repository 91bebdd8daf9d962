"""Overflow recovery when the upstream's real window is far below the configured one (vLLM's
--max-model-len, Ollama's num_ctx, a smaller deployment behind the same name)."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import MODEL, StackFactory


def conversation(turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        msgs += [
            {"role": "user", "content": f"Question {i}: " + "tell me about windows " * 20},
            {"role": "assistant", "content": f"Answer {i}: " + "windows are finite " * 20},
        ]
    msgs.append({"role": "user", "content": "And finally?"})
    return msgs


def test_a_2k_upstream_behind_a_64k_config_recovers_and_learns(make_stack: StackFactory) -> None:
    stack = make_stack(window=2048, proxy_window=64000)
    msgs = conversation(120)  # about 19,000 tokens
    assert stack.upstream_count({"messages": msgs}) > 18000
    raw = stack.client.chat.completions.with_raw_response.create(model=MODEL, messages=msgs)  # type: ignore[arg-type]
    assert raw.http_response.status_code == 200
    assert raw.headers["x-contextwarden-retries"] == "1"
    assert int(raw.headers["x-contextwarden-budget"]) < 2048
    # The learned window holds from the start for the next request.
    again = stack.client.chat.completions.with_raw_response.create(model=MODEL, messages=msgs)  # type: ignore[arg-type]
    assert again.headers["x-contextwarden-retries"] == "0"
    # Only the deliberate first attempt went over the real window.
    over = [p for p in stack.received if stack.upstream_count(p) > 2048]
    assert len(over) == 1
    last = stack.received[-1]["messages"]
    assert last[0]["content"] == "You are terse." and last[-1]["content"] == "And finally?"
