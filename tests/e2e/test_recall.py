"""Recall: a 40-step task in a 16k window whose later steps need earlier outputs, in each
format, streamed and not, driven by the real SDKs through the proxy.

Without recall the scripted model must read a file again each time the output it needs was
cleared; with ``recall: true`` it calls the proxy's recall tool instead, the proxy answers
the call itself, and the client never sees the tool: no answer or stream it receives
mentions it, and nothing it sends back does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.clients.conftest import Recorder
from tests.clients.scripted import KEY, RECALL, STEP, Script, create_scripted

WINDOW = 16_000
STEPS = 40
LAG, EVERY = 6, 3  # steps 9, 12, ..., 39 need the output of the step six before
TASK = "Read the step files in order; some steps need an earlier one."
MODELS = {
    "gpt-4.1": {"context_window": WINDOW},
    "claude-demo": {"context_window": WINDOW, "tokenizer": "estimate"},
}


def step_text(path: str) -> str:
    k = int(STEP.findall(path)[-1])
    lines = (f"step {k} line {i}: module {i * k} built in {i + k} ms\n" for i in range(150))
    return KEY.format(k=k) + f"{k * 7919 % 10007:05d}\n" + "".join(lines)


class Session:
    def __init__(self, stack: ExitStack, tmp_path: Path, recall: bool) -> None:
        self.script = Script(steps=STEPS, window=WINDOW, lag=LAG, every=EVERY)
        upstream = stack.enter_context(BackgroundServer(create_scripted(self.script)))
        apis = ["chat_completions", "responses", "messages"]
        config: dict[str, Any] = {
            "upstreams": {"scripted": {"base_url": f"{upstream.url}/v1", "apis": apis}},
            "default_upstream": "scripted",
            "data_dir": str(tmp_path / "data"),
            "models": MODELS,
            "policies": {"default": {"recall": recall}},
        }
        self.recorder = Recorder(create_app(load_settings(None, **config)))
        self.url = stack.enter_context(BackgroundServer(self.recorder)).url


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Callable[[bool], Session]]:
    with ExitStack() as stack:
        yield lambda recall: Session(stack, tmp_path, recall)


def chat_loop(s: Session, stream: bool) -> str:
    with openai.OpenAI(base_url=f"{s.url}/v1", api_key="sk-test", max_retries=0) as client:
        tool = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip
        messages: list[Any] = [{"role": "system", "content": "Use the tools."}]
        messages.append({"role": "user", "content": TASK})
        while True:
            if stream:
                chunks = client.chat.completions.create(
                    model="gpt-4.1",
                    messages=messages,
                    tools=[tool],
                    stream=True,  # type: ignore[list-item]
                )
                message: dict[str, Any] = {"role": "assistant", "content": ""}
                calls: dict[int, Any] = {}
                for chunk in chunks:
                    delta = chunk.choices[0].delta
                    message["content"] += delta.content or ""
                    for part in delta.tool_calls or []:
                        call = calls.setdefault(part.index, {"id": part.id, "type": "function", "function": {"name": "", "arguments": ""}})  # fmt: skip
                        call["function"]["name"] += part.function.name or ""  # type: ignore[union-attr]
                        call["function"]["arguments"] += part.function.arguments or ""  # type: ignore[union-attr]
                if calls:
                    message["tool_calls"] = [calls[k] for k in sorted(calls)]
            else:
                answer = client.chat.completions.create(
                    model="gpt-4.1",
                    messages=messages,
                    tools=[tool],  # type: ignore[list-item]
                )
                message = answer.choices[0].message.model_dump(exclude_none=True)
            messages.append(message)
            if not message.get("tool_calls"):
                return str(message["content"])
            for call in message["tool_calls"]:
                path = orjson.loads(call["function"]["arguments"])["path"]
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": step_text(path)}
                )


def responses_loop(s: Session, stream: bool) -> str:
    with openai.OpenAI(base_url=f"{s.url}/v1", api_key="sk-test", max_retries=0) as client:
        tool = {"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}  # fmt: skip
        items: list[Any] = [{"role": "user", "content": TASK}]
        while True:
            args: dict[str, Any] = {
                "model": "gpt-4.1",
                "input": items,
                "tools": [tool],
                "store": False,
            }
            if stream:
                events = client.responses.create(**args, stream=True)
                done = [e for e in events if e.type == "response.completed"]
                output = done[-1].response.output  # type: ignore[union-attr]
            else:
                output = client.responses.create(**args).output
            out = [i.model_dump(exclude_none=True) for i in output]
            items += out
            calls = [i for i in out if i["type"] == "function_call"]
            if not calls:
                return str(out[-1]["content"][0]["text"])
            for call in calls:
                path = orjson.loads(call["arguments"])["path"]
                items.append({"type": "function_call_output", "call_id": call["call_id"], "output": step_text(path)})  # fmt: skip


def messages_loop(s: Session, stream: bool) -> str:
    with anthropic.Anthropic(base_url=s.url, api_key="sk-test", max_retries=0) as client:
        tool = {"name": "Bash", "description": "Run a shell command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}  # fmt: skip
        messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        while True:
            args: dict[str, Any] = {"model": "claude-demo", "max_tokens": 1024, "tools": [tool]}
            args |= {"thinking": {"type": "enabled", "budget_tokens": 512}, "messages": messages}
            if stream:
                with client.messages.stream(**args) as events:
                    final = events.get_final_message()
            else:
                final = client.messages.create(**args)
            blocks = [b.model_dump(exclude_none=True) for b in final.content]
            messages.append({"role": "assistant", "content": blocks})
            uses = [b for b in blocks if b["type"] == "tool_use"]
            if not uses:
                return str(blocks[-1]["text"])
            results = [{"type": "tool_result", "tool_use_id": u["id"], "content": step_text(u["input"]["command"])} for u in uses]  # fmt: skip
            messages.append({"role": "user", "content": results})


LOOPS = {"chat": chat_loop, "responses": responses_loop, "messages": messages_loop}


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("fmt", list(LOOPS))
def test_recall_replaces_re_runs_and_the_client_never_sees_it(
    session: Callable[[bool], Session], fmt: str, stream: bool
) -> None:
    without = session(False)
    assert LOOPS[fmt](without, stream).startswith(f"Done after {STEPS} steps")
    with_recall = session(True)
    assert LOOPS[fmt](with_recall, stream).startswith(f"Done after {STEPS} steps")
    assert not without.script.refused and not with_recall.script.refused
    assert without.script.reruns >= 5  # the needed outputs were cleared
    assert with_recall.script.recalls >= 5
    assert with_recall.script.reruns <= without.script.reruns // 5  # at least 80% fewer
    # Without recall it is never offered; with it, it reached the upstream, never the client.
    assert not any(RECALL in orjson.dumps(r.body).decode() for r in without.script.received)
    assert any(RECALL in orjson.dumps(r.body).decode() for r in with_recall.script.received)
    seen = b"".join(body for _, _, body in with_recall.recorder.answers)
    assert with_recall.recorder.answers and RECALL.encode() not in seen
    assert not any(RECALL in orjson.dumps(body).decode() for _, body in with_recall.recorder.sent)


def test_the_same_request_is_forwarded_with_the_same_bytes_and_a_failed_build_is_kept(
    session: Callable[[bool], Session],
) -> None:
    """Determinism: under ``recall`` the same conversation is cut, cleared and offered the
    tool with the same bytes each time (the provider's cached prefix survives); and the output
    of a failed build, an early step's, is forwarded whole however much else is cleared."""
    s = session(True)
    failed = "Compiling app\n" + "  compiling module\n" * 40 + "error: build failed\nexit status 2"
    messages: list[Any] = [{"role": "system", "content": "Use the tools."}]
    messages.append({"role": "user", "content": TASK})
    for k in range(1, 13):
        args = orjson.dumps({"path": f"step-{k:02d}.txt"}).decode()
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "read_file", "arguments": args},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        output = failed if k == 2 else step_text(f"step-{k:02d}.txt")
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": output})
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    body = {"model": "gpt-4.1", "messages": messages, "tools": [tool]}
    with openai.OpenAI(base_url=f"{s.url}/v1", api_key="sk-test", max_retries=0) as client:
        for _ in range(2):
            raw = client.chat.completions.with_raw_response.create(**body)
            assert "tool_result_microcompact" in raw.headers["x-contextwarden-actions"]
        first, second = s.script.received[-2].body, s.script.received[-1].body
        assert orjson.dumps(first) == orjson.dumps(second)
        assert RECALL in orjson.dumps(first["tools"]).decode()
        kept = {
            m.get("tool_call_id"): m["content"] for m in first["messages"] if m["role"] == "tool"
        }
        assert kept["c2"] == failed
        assert sum("recall: r" in str(c) for c in kept.values()) >= 5
