"""A newest step too large for the window, through the proxy, in each format, driven by the
real SDKs: the hidden corpus's shape (three calls at once, 847 + 640 + 485 tokens of output, at
a 2,048-token window) and a test run of 5,000 lines at a 4,096 window. The release before this
one refused both with a 400; now the step's outputs are cut (strategies/step_cut.py) and the
upstream, counting with its own tokenizer, accepts the request. Under ``recall: true`` each cut
names its handle (the marker priced as sent: it was refused or lost its error line)."""

from __future__ import annotations

import random
import re
from typing import Any

import openai
import pytest

from proxy.demo.anthropic import AnthropicCounter
from proxy.demo.responses import ResponsesCounter
from tests.e2e.conftest import MODEL, Stack, StackFactory
from tests.strategies.invariants import CUT_MARK

CLAUDE = "claude-demo"
WORDS = ("alpha", "beta", "gamma", "delta", "build", "module", "function", "value", "parse")
ERROR = "tests/test_auth.py::test_login FAILED                               [ 50%]"
SYSTEM = "You are a coding agent. Fix what fails."
TASK = "Fix the failing build in this repository."


def output(tokens: int, seed: int, error: bool = True) -> str:
    """About ``tokens`` tokens of a command's output (a line is about 12), with an error line
    in its middle."""
    rnd = random.Random(seed)
    lines = [
        f"{k:4d} | " + " ".join(rnd.choice(WORDS) for _ in range(8)) for k in range(tokens // 12)
    ]
    if error:
        lines[len(lines) // 2] = ERROR
    return "\n".join(lines)


SHAPES = {
    "three calls at 2,048": (2048, [output(847, 1), output(640, 2, False), output(485, 3)]),
    "5,000 lines at 4,096": (4096, [output(5000 * 12, 4)]),
}


def chat_messages(outputs: list[str]) -> list[dict[str, Any]]:
    old = {"id": "old", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
    calls = [
        {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "sh", "arguments": f'{{"k": {k}}}'},
        }
        for k in range(len(outputs))
    ]
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": None, "tool_calls": [old]},
        {"role": "tool", "tool_call_id": "old", "content": output(300, 9)},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{k}", "content": o} for k, o in enumerate(outputs)),
    ]


def check(text: str, window: int, counted: int, recall: bool) -> None:
    """The outputs' ``text`` as forwarded, ``counted`` by the upstream's own tokenizer."""
    assert counted <= window
    assert CUT_MARK in text
    assert ERROR in text  # every error line kept
    named = re.findall(r"^\[Output cut .*; recall: r[0-9]{15}\]$", text, re.MULTILINE)
    assert bool(named) is recall
    assert ("run the tool again narrower" in text) is not recall


RECALL = pytest.mark.parametrize("recall", [False, True], ids=["", "recall"])


@RECALL
@pytest.mark.parametrize("shape", list(SHAPES))
def test_chat_completions(make_stack: StackFactory, shape: str, recall: bool) -> None:
    window, outputs = SHAPES[shape]
    stack = make_stack(window=window, policies={"default": {"recall": recall}})
    tools = [{"type": "function", "function": {"name": "sh", "parameters": {"type": "object"}}}]
    for _ in range(2):  # the same request again is cut afresh (never replayed, no fallback)
        raw = stack.client.chat.completions.with_raw_response.create(
            model=MODEL, messages=chat_messages(outputs), tools=tools, max_tokens=256
        )
        assert raw.http_response.status_code == 200
        assert stack.upstream_count(stack.received[-1]) <= window
    assert "step-outputs-cut" in raw.headers["x-contextwarden-actions"]
    sent = stack.received[-1]
    tail = sent["messages"][-len(outputs) - 1 :]
    assert [c["id"] for c in tail[0]["tool_calls"]] == [f"c{k}" for k in range(len(outputs))]
    text = "\n".join(m["content"] for m in tail[1:])
    check(text, window - 256, stack.upstream_count(sent), recall)


@RECALL
@pytest.mark.parametrize("shape", list(SHAPES))
def test_responses(make_stack: StackFactory, shape: str, recall: bool) -> None:
    window, outputs = SHAPES[shape]
    stack = make_stack(window=window, policies={"default": {"recall": recall}})
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for k in range(len(outputs)):
        items.append({"type": "function_call", "call_id": f"c{k}", "name": "sh", "arguments": "{}"})
    items += [
        {"type": "function_call_output", "call_id": f"c{k}", "output": text}
        for k, text in enumerate(outputs)
    ]
    tools = [{"type": "function", "name": "sh", "parameters": {"type": "object"}}]
    for _ in range(2):  # the same request again is cut afresh (never replayed, no fallback)
        raw = stack.client.responses.with_raw_response.create(
            model=MODEL, input=items, instructions=SYSTEM, tools=tools, max_output_tokens=256
        )  # type: ignore[call-overload]
        assert raw.http_response.status_code == 200
        assert ResponsesCounter("o200k_base").prompt(stack.received[-1]) <= window
    sent = stack.received[-1]
    shown = [i for i in sent["input"] if i.get("type") == "function_call_output"]
    assert [i["call_id"] for i in shown] == [f"c{k}" for k in range(len(outputs))]
    text = "\n".join(i["output"] for i in shown)
    check(text, window - 256, ResponsesCounter("o200k_base").prompt(sent), recall)


@RECALL
@pytest.mark.parametrize("shape", list(SHAPES))
def test_anthropic_messages(make_stack: StackFactory, shape: str, recall: bool) -> None:
    window, outputs = SHAPES[shape]
    models = {CLAUDE: {"context_window": window, "tokenizer": "estimate"}}
    policies = {"default": {"recall": recall}}
    stack: Stack = make_stack(window=window, models=models, apis=["messages"], policies=policies)
    uses = [
        {"type": "tool_use", "id": f"toolu_{k}", "name": "Bash", "input": {"k": k}}
        for k in range(len(outputs))
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": text}
        for k, text in enumerate(outputs)
    ]
    messages = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": results},
    ]
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
    for _ in range(2):  # the same request again is cut afresh (never replayed, no fallback)
        raw = stack.anthropic.messages.with_raw_response.create(
            model=CLAUDE, max_tokens=256, system=SYSTEM, messages=messages, tools=tools
        )  # type: ignore[arg-type]
        assert raw.http_response.status_code == 200
    sent = stack.received[-1]
    blocks = sent["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in blocks] == [f"toolu_{k}" for k in range(len(outputs))]
    text = "\n".join(
        b["content"] if isinstance(b["content"], str) else b["content"][0]["text"] for b in blocks
    )
    check(text, window - 256, AnthropicCounter().prompt(sent), recall)


def test_error_lines_before_a_few_tokens_of_reply(make_stack: StackFactory) -> None:
    """A window whose room beside the frame holds the step's marker but not its error line at
    the reply limit asked for. With the limit the client's own (``lower_max_tokens: false``),
    the cut gives the error line up; with a limit the policy lowers (the default), the reply
    gives the few tokens the line needs (up to half of it) and the failing line reaches
    the model."""
    outputs = [output(5000 * 12, 4)]
    tools = [{"type": "function", "function": {"name": "sh", "parameters": {"type": "object"}}}]
    own = {"default": {"lower_max_tokens": False}}
    found = None
    for window in range(4_200, 4_300, 10):
        control = make_stack(window=window, policies=own)
        try:
            control.client.chat.completions.create(
                model=MODEL, messages=chat_messages(outputs), tools=tools, max_tokens=4096
            )
        except openai.BadRequestError:
            continue  # not even the marker fits beside the client's own limit
        text = control.received[-1]["messages"][-1]["content"]
        if CUT_MARK in text and ERROR not in text:
            found = window
            break
    assert found is not None, "no window from 4,200 to 4,300 lost the error line"
    stack = make_stack(window=found)
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL, messages=chat_messages(outputs), tools=tools, max_tokens=4096
    )
    sent = stack.received[-1]
    text = sent["messages"][-1]["content"]
    assert CUT_MARK in text and ERROR in text
    assert stack.upstream_count(sent) + sent["max_tokens"] <= found
    assert 4096 - 4096 // 4 <= sent["max_tokens"] < 4096
    assert (
        f"max-tokens-lowered 4096->{sent['max_tokens']}" in raw.headers["x-contextwarden-actions"]
    )
