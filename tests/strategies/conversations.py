"""Hypothesis strategies for generated OpenAI conversations (tool loops, parts, CJK, emoji)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# A long text (300 to 900 characters) is a random 30-90 character piece said ten times: its
# token count varies as a random one's does, and it has no newline for the lossless pass to
# fold, but hypothesis draws a tenth of the characters, which made these long strings the
# larger part of the 10,000-conversation test's time (tests/strategies/test_invariants_at_scale).
LONG = st.text(alphabet="abc ", min_size=30, max_size=90).map(lambda piece: piece * 10)
TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="你好世界日本語のテキスト🙂🚀é", max_size=30),
    st.just(""),
    LONG,
)


@st.composite
def content(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(TEXT)
    parts: list[dict[str, Any]] = [{"type": "text", "text": draw(TEXT)}]
    if draw(st.booleans()):
        parts.append(
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}
        )
    return parts


@st.composite
def turn(draw: st.DrawFn, index: int, legacy: bool = False) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": draw(content())}]
    if draw(st.booleans()):
        msgs[0]["name"] = "alice"
    for _ in range(draw(st.integers(0, 2)) if legacy else 0):
        # The 2023 format: one function_call, answered by one function message.
        call = {"name": "lookup", "arguments": draw(TEXT)}
        msgs.append({"role": "assistant", "content": None, "function_call": call})
        msgs.append({"role": "function", "name": "lookup", "content": draw(TEXT)})
    for loop in range(0 if legacy else draw(st.integers(0, 2))):
        n_calls = draw(st.integers(1, 3))
        ids = [f"call_{index}_{loop}_{k}" for k in range(n_calls)]
        calls = [
            {"id": i, "type": "function", "function": {"name": "lookup", "arguments": draw(TEXT)}}
            for i in ids
        ]
        msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
        msgs += [{"role": "tool", "tool_call_id": i, "content": draw(TEXT)} for i in ids]
    msgs.append({"role": "assistant", "content": draw(TEXT), "x_unknown": {"kept": index}})
    return msgs


@st.composite
def conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(TEXT)})
    legacy = draw(st.integers(0, 3)) == 0  # a quarter in the functions format
    for i in range(draw(st.integers(1, 8))):
        msgs += draw(turn(i, legacy))
    if draw(st.booleans()):
        msgs.pop()  # the conversation may end on a tool result or a user message
    if msgs[-1]["role"] == "assistant" and draw(st.booleans()):
        msgs.append({"role": "user", "content": draw(TEXT)})
    return msgs
