"""Recall on the long-task workload: a scripted agent (tests/clients/scripted.py) runs a task
of ``STEPS`` file reads through the proxy, in chat and Messages, where every third step past
the sixth needs the output of the step six before it. When that output is no longer in the
prompt as it was read, the agent recalls it if the proxy offers the recall tool, and
otherwise reads the file again (a re-run).

Per window (16k, 32k) and policy (the default, and ``recall: true``): the re-runs, the
recalls, and how many step outputs each forwarded request kept verbatim (mean over the
requests that were trimmed).
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.clients.scripted import KEY, STEP, Script, create_scripted

STEPS = 40
LAG, EVERY = 6, 3
MODELS = {
    "gpt-4.1": {"context_window": 16_000},
    "claude-demo": {"context_window": 16_000, "tokenizer": "estimate"},
}


def step_text(k: int) -> str:
    lines = (f"step {k} line {i}: module {i * k} built in {i + k} ms\n" for i in range(150))
    return KEY.format(k=k) + f"{k * 7919 % 10007:05d}\n" + "".join(lines)


def chat(client: httpx.Client, model: str) -> None:
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    messages: list[Any] = [{"role": "system", "content": "Use the tools."}]
    messages.append({"role": "user", "content": "Read the step files in order."})
    for _ in range(3 * STEPS):
        body = {"model": model, "messages": messages, "tools": [tool]}
        answer = client.post("/v1/chat/completions", json=body)
        answer.raise_for_status()
        message = answer.json()["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return
        for call in message["tool_calls"]:
            k = int(STEP.findall(call["function"]["arguments"])[-1])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": step_text(k)})


def messages(client: httpx.Client, model: str) -> None:
    tool = {"name": "Bash", "input_schema": {"type": "object"}}
    turns: list[Any] = [{"role": "user", "content": "Read the step files in order."}]
    for _ in range(3 * STEPS):
        body = {"model": model, "max_tokens": 1024, "messages": turns, "tools": [tool]}
        answer = client.post("/v1/messages", json=body)
        answer.raise_for_status()
        blocks = answer.json()["content"]
        turns.append({"role": "assistant", "content": blocks})
        uses = [b for b in blocks if b["type"] == "tool_use"]
        if not uses:
            return
        results = [
            {
                "type": "tool_result",
                "tool_use_id": u["id"],
                "content": step_text(int(STEP.findall(u["input"]["command"])[-1])),
            }
            for u in uses
        ]
        turns.append({"role": "user", "content": results})


LOOPS = {"chat": (chat, "gpt-4.1"), "messages": (messages, "claude-demo")}


def verbatim(body: dict[str, Any]) -> int:
    """How many step outputs a forwarded request holds as they were read."""
    text = orjson.dumps(body).decode()
    return sum(1 for k in range(1, STEPS + 1) if orjson.dumps(step_text(k)).decode() in text)


def one_run(fmt: str, window: int, recall: bool) -> list[str]:
    script = Script(steps=STEPS, window=window, lag=LAG, every=EVERY)
    models = {m: {**spec, "context_window": window} for m, spec in MODELS.items()}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as data:
        upstream = stack.enter_context(BackgroundServer(create_scripted(script)))
        apis = ["chat_completions", "responses", "messages"]
        config: dict[str, Any] = {
            "upstreams": {"scripted": {"base_url": f"{upstream.url}/v1", "apis": apis}},
            "default_upstream": "scripted",
            "data_dir": str(Path(data)),
            "models": models,
            "policies": {"default": {"recall": recall}},
        }
        proxy = stack.enter_context(BackgroundServer(create_app(load_settings(None, **config))))
        with httpx.Client(base_url=proxy.url, timeout=120) as client:
            run, model = LOOPS[fmt]
            run(client, model)
    kept = [verbatim(r.body) for r in script.received if r.status == 200]
    trimmed = [k for k in kept if k < max(kept)] or kept
    return [
        f"{fmt}, {window // 1000}k",
        "recall: true" if recall else "default",
        str(script.reruns),
        str(script.recalls),
        str(len(script.received)),
        f"{sum(trimmed) / len(trimmed):.1f}",
    ]


def recall_rows(quick: bool) -> tuple[list[str], list[list[str]]]:
    rows = []
    windows = (16_000,) if quick else (16_000, 32_000)
    for fmt in ("chat",) if quick else ("chat", "messages"):
        for window in windows:
            for recall in (False, True):
                rows.append(one_run(fmt, window, recall))
    header = ["workload", "policy", "re-runs", "recalls", "upstream requests", "verbatim outputs"]
    return header, rows
