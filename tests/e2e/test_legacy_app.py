"""A 2023 app: functions, function_call and function results, against a small window."""

from __future__ import annotations

from typing import Any

from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.e2e.conftest import MODEL, StackFactory
from tests.strategies.invariants import assert_tool_pairs_intact

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))
FUNCTIONS = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def test_a_functions_app_grows_past_the_window_without_broken_pairs(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(window=1024)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You report the weather."}]
    for turn in range(30):
        messages.append({"role": "user", "content": f"Weather in city {turn}? " + "please " * 20})
        call = {"name": "get_weather", "arguments": f'{{"city": "city {turn}"}}'}
        messages.append({"role": "assistant", "content": None, "function_call": call})
        messages.append({"role": "function", "name": "get_weather", "content": "sunny " * 40})
        reply = stack.client.chat.completions.create(
            model=MODEL,
            messages=messages,  # type: ignore[arg-type]
            functions=FUNCTIONS,  # type: ignore[arg-type]
            max_tokens=64,
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    assert len(stack.received) == 30
    for payload in stack.received:
        assert_tool_pairs_intact(payload["messages"])
        # The proxy's own count of the forwarded prompt (function calls included) fits.
        tools = COUNTER.tools(None, payload.get("functions"))
        assert count_prompt(COUNTER, payload["messages"]) + tools + 64 <= 1024
    assert any(len(p["messages"]) < 20 for p in stack.received)  # it did have to trim
