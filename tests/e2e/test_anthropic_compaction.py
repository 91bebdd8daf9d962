"""Anthropic's compaction served for an upstream without it (#53 item 1), through the real
``anthropic`` SDK: the ``compact_20260112`` edit past its trigger puts a ``compaction`` block
first in the answer, whole and streamed (later block indexes one higher); with
``pause_after_compaction``, and for the top-level ``compaction`` parameter, the block comes
alone (``stop_reason`` ``compaction``) and the upstream is not asked; a block sent back stands
for everything before it, as the API reads it. The upstream never sees the edit, the parameter
or a block. A compaction that cannot be made: no block (the edit), a null one (the parameter)."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Stack, StackFactory
from tests.e2e.test_responses_compaction import history

CLAUDE = "claude-demo"
EDIT = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1000}}


def stack_of(make_stack: StackFactory) -> Stack:
    models = {CLAUDE: {"context_window": 32_000, "tokenizer": "estimate"}}
    return make_stack(window=32_000, models=models, apis=["messages"])


def create(stack: Stack, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    raw = stack.anthropic.messages.with_raw_response.create(
        model=CLAUDE,
        max_tokens=256,
        messages=messages,
        extra_body=extra,  # type: ignore[arg-type]
    )
    assert raw.http_response.status_code == 200, raw.http_response.text
    data: dict[str, Any] = raw.http_response.json()
    return data


def clean(sent: dict[str, Any]) -> None:
    text = str(sent)
    assert "compact_20260112" not in text and "'compaction'" not in text


def test_past_the_trigger_the_block_comes_first(make_stack: StackFactory) -> None:
    stack = stack_of(make_stack)
    answer = create(stack, history(12), context_management={"edits": [EDIT]})
    first, *rest = answer["content"]
    assert first["type"] == "compaction" and "eu-west-3" in first["content"]
    assert rest and rest[0]["type"] == "text" and answer["stop_reason"] == "end_turn"
    clean(stack.received[-1])
    # Sent back, the block stands for everything before it.
    follow = [
        *history(12),
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "Where do we deploy?"},
    ]
    create(stack, follow, context_management={"edits": [EDIT]})
    sent = stack.received[-1]
    clean(sent)
    assert "Noted step 3." not in str(sent)  # what the block stands for is dropped
    assert "eu-west-3" in str(sent["messages"][0])  # and read from its summary


def test_streamed_the_block_comes_first(make_stack: StackFactory) -> None:
    stack = stack_of(make_stack)
    with stack.anthropic.messages.stream(
        model=CLAUDE, max_tokens=256, messages=history(12),  # type: ignore[arg-type]
        extra_body={"context_management": {"edits": [EDIT]}},
    ) as events:  # fmt: skip
        kinds = [(e.type, getattr(e, "index", None)) for e in events]
        final = events.get_final_message()
    starts = [i for kind, i in kinds if kind == "content_block_start"]
    assert starts == list(range(len(starts))) and len(starts) >= 2
    assert final.content[0].type == "compaction"  # type: ignore[comparison-overlap]


def test_a_pause_or_the_parameter_answers_with_the_block_alone(make_stack: StackFactory) -> None:
    stack = stack_of(make_stack)
    before = len(stack.received)
    paused = create(
        stack, history(12), context_management={"edits": [{**EDIT, "pause_after_compaction": True}]}
    )
    alone = create(stack, history(12), compaction={"type": "summarize"})
    for answer in (paused, alone):
        assert answer["stop_reason"] == "compaction"
        assert [b["type"] for b in answer["content"]] == ["compaction"]
        assert "eu-west-3" in answer["content"][0]["content"]
    assert len(stack.received) == before  # the model was not asked
    with stack.anthropic.messages.stream(
        model=CLAUDE, max_tokens=256, messages=history(12),  # type: ignore[arg-type]
        extra_body={"compaction": {"type": "summarize"}},
    ) as events:  # fmt: skip
        final = events.get_final_message()
    assert final.stop_reason == "compaction"  # type: ignore[comparison-overlap]


def test_when_no_summary_can_be_made(make_stack: StackFactory) -> None:
    stack = stack_of(make_stack)
    stack.upstream_app.state.fail_summaries = True
    answer = create(stack, history(12), context_management={"edits": [EDIT]})
    assert all(b["type"] != "compaction" for b in answer["content"])
    clean(stack.received[-1])
    failed = create(stack, history(12), compaction={"type": "summarize"})
    assert failed["content"] == [{"type": "compaction", "content": None}]
