"""Property tests over generated Responses and Messages conversations, through the adapters and
the one engine: whatever the budget, the written request keeps every call with its output
(reasoning and thinking with the items they belong to), keeps the running task's statement and
its newest step byte for byte and every assistant item it keeps as it came, fits the budget by
the proxy's count, and that count bounds the upstream's own."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.demo.anthropic import AnthropicCounter, invalid_request, sign
from proxy.demo.responses import ResponsesCounter, invalid_items
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.responses import RESPONSES
from proxy.windows.tokenizers import Tokenizers
from strategies.engine import DEFAULT_POLICY, FitRequest, fit
from strategies.errors import DoesNotFit
from strategies.tokens import MemoCounter, count_prompt

O200K = Tokenizers(1.2).for_model("gpt-4o").counter
ESTIMATE = Tokenizers(1.2).for_model("claude-demo").counter
WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "build", "fix"]), max_size=40)


@st.composite
def responses_input(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for t in range(draw(st.integers(1, 8))):
        items.append({"role": "user", "content": " ".join(draw(WORDS)) or "hi"})
        for c in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                items.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{t}_{c}",
                        "summary": [],
                        "encrypted_content": "x" * draw(st.integers(0, 300)),
                    }
                )
            calls = draw(st.integers(1, 2))
            for p in range(calls):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": f"c{t}_{c}_{p}",
                        "name": "read",
                        "arguments": '{"path": "a"}',
                    }
                )
            for p in range(calls):
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": f"c{t}_{c}_{p}",
                        "output": " ".join(draw(WORDS)),
                    }
                )
        if draw(st.booleans()):
            items.append({"type": "reasoning", "id": f"rs_{t}", "summary": []})
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": " ".join(draw(WORDS))}],
                }
            )
    return items


@st.composite
def anthropic_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t in range(draw(st.integers(1, 8))):
        messages.append(
            {"role": "user", "content": [{"type": "text", "text": " ".join(draw(WORDS)) or "hi"}]}
        )
        for c in range(draw(st.integers(0, 3))):
            thought = f"thinking {t} {c}"
            uses = [
                {"type": "tool_use", "id": f"toolu_{t}_{c}_{p}", "name": "Read", "input": {"p": p}}
                for p in range(draw(st.integers(1, 2)))
            ]
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": thought, "signature": sign(thought)},
                        *uses,
                    ],
                }
            )
            results = [
                {"type": "tool_result", "tool_use_id": u["id"], "content": " ".join(draw(WORDS))}
                for u in uses
            ]
            messages.append({"role": "user", "content": results})
        if messages[-1]["role"] == "user" and draw(st.booleans()):
            messages.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": " ".join(draw(WORDS)) or "ok"}],
                }
            )
            messages.append({"role": "user", "content": "next"})
    return messages


def running(items: list[dict[str, Any]], is_user: Any, is_assistant: Any) -> bytes:
    """The running task's newest step (the last run of assistant items after its statement,
    the last user item, and what follows), and the statement when no step was taken yet."""
    task = max(i for i, item in enumerate(items) if is_user(item))
    newest = len(items)
    for i in range(len(items) - 1, task, -1):
        if is_assistant(items[i]):
            newest = i
        elif newest < len(items):
            break
    return orjson.dumps([items[task] if newest == len(items) else None, items[newest:]])


def same_task(written: list[dict[str, Any]], sent: list[dict[str, Any]], is_user: Any) -> bool:
    """The statement goes as it came, or (once steps have begun, and only when it alone takes
    more than a quarter of the budget) with its middle cut and a marker in its place."""
    ours = next(item for item in reversed(written) if is_user(item))
    theirs = next(item for item in reversed(sent) if is_user(item))
    return ours == theirs or "characters of this message removed" in orjson.dumps(ours).decode()


def assistants_as_sent(
    written: list[dict[str, Any]], sent: list[dict[str, Any]], is_assistant: Any
) -> bool:
    """Every assistant item the proxy forwards is one the client sent, byte for byte."""
    originals = {orjson.dumps(item) for item in sent if is_assistant(item)}
    return all(orjson.dumps(item) in originals for item in written if is_assistant(item))


def run(fmt: Any, payload: dict[str, Any], counter: Any, budget: int) -> dict[str, Any] | None:
    view = fmt.view(payload)
    memo = MemoCounter(view.counter(counter))
    try:
        result = fit(
            FitRequest(
                messages=view.messages,
                budget=budget,
                counter=memo,
                policy=DEFAULT_POLICY,
                atomic_current=True,
            )
        )
    except DoesNotFit:
        return None
    written = fmt.write(payload, view, result.messages)
    again = fmt.view(written)  # the proxy's count of what it would forward
    assert count_prompt(view.counter(counter), again.messages) <= budget
    return written


@settings(max_examples=300, deadline=None)
@given(items=responses_input(), share=st.floats(0.05, 1.2))
def test_responses_invariants(items: list[dict[str, Any]], share: float) -> None:
    payload = {"model": "gpt-4o", "instructions": "Be brief.", "input": items}
    view = RESPONSES.view(payload)
    total = count_prompt(view.counter(O200K), view.messages)
    assert ResponsesCounter("o200k_base").prompt(payload) <= total  # an upper bound
    written = run(RESPONSES, payload, O200K, max(10, int(total * share)))
    if written is None:
        return
    assert invalid_items(written["input"]) is None
    user = lambda i: i.get("role") == "user"  # noqa: E731
    side = lambda i: i.get("type") in ("reasoning", "function_call")  # noqa: E731
    assert running(written["input"], user, side) == running(items, user, side)
    assert same_task(written["input"], items, user)
    assert assistants_as_sent(written["input"], items, side)
    assert ResponsesCounter("o200k_base").prompt(written) <= total


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(messages=anthropic_messages(), share=st.floats(0.05, 1.2))
def test_anthropic_invariants(messages: list[dict[str, Any]], share: float) -> None:
    payload = {
        "model": "claude-demo",
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": messages,
    }
    view = ANTHROPIC.view(payload)
    total = count_prompt(view.counter(ESTIMATE), view.messages)
    assert AnthropicCounter().prompt(payload) <= total  # an upper bound
    written = run(ANTHROPIC, payload, ESTIMATE, max(10, int(total * share)))
    if written is None:
        return
    assert invalid_request(written) is None

    def user(m: dict[str, Any]) -> bool:
        c = m["content"]
        return m["role"] == "user" and (isinstance(c, str) or any(b["type"] == "text" for b in c))

    def assistant(m: dict[str, Any]) -> bool:
        return m["role"] == "assistant"

    assert running(written["messages"], user, assistant) == running(messages, user, assistant)
    assert same_task(written["messages"], messages, user)
    assert assistants_as_sent(written["messages"], messages, assistant)
    assert written["system"] == "Be brief."
