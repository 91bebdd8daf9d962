"""An upstream that truncates silently, as Ollama does at ``num_ctx``: a chat tool loop through
the real ``openai`` SDK, against the scripted upstream cutting every prompt over its window
from the start (its system message and last message kept) and answering with the usage of
what it kept. Nothing in any answer says so but that usage.

The model is not configured and the upstream states nothing: the proxy forwards the loop whole
until the first cut, tells it from the usage (a header on that answer, a metric), learns the
window from what was read, and fits every later request to it. The task finishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.clients.scripted import Script, create_scripted

MODEL = "qwen2.5-coder:7b"  # in no table: its window is unknown
WINDOW = 6000
STEPS = 40


def step_text(path: str) -> str:
    k = int(path.split("-")[1].split(".")[0])
    return "".join(f"step {k} line {i}: the build of module {i * k} passed\n" for i in range(40))


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[Script, str]]:
    script = Script(steps=STEPS, window=WINDOW, truncates=True)
    with ExitStack() as stack:
        server = stack.enter_context(BackgroundServer(create_scripted(script)))
        config: dict[str, Any] = {
            "upstreams": {"ollama": {"base_url": f"{server.url}/v1"}},
            "default_upstream": "ollama",
            "data_dir": str(tmp_path / "data"),
        }
        proxy = stack.enter_context(BackgroundServer(create_app(load_settings(None, **config))))
        yield script, proxy.url


def test_a_loop_against_a_silently_truncating_upstream_learns_its_window(
    upstream: tuple[Script, str],
) -> None:
    script, url = upstream
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0) as client:
        tool = {
            "type": "function",
            "function": {
                "name": "read_file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
        messages: list[Any] = [
            {"role": "system", "content": "You are a coding agent. Use the tools."},
            {"role": "user", "content": "Read the step files in order."},
        ]
        told = []
        while True:
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL,
                messages=messages,
                tools=[tool],  # type: ignore[list-item]
            )
            if "x-contextwarden-upstream-truncated" in raw.headers:
                told.append(raw.headers["x-contextwarden-upstream-truncated"])
            message = raw.parse().choices[0].message.model_dump(exclude_none=True)
            messages.append(message)
            if not message.get("tool_calls"):
                break
            call = message["tool_calls"][0]
            path = orjson.loads(call["function"]["arguments"])["path"]
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": step_text(path)}
            )
        cut = [r for r in script.received if r.truncated]
        assert 1 <= len(cut) == len(told) <= 3, told  # told every time, learned in a few
        assert f"Done after {STEPS} steps" in messages[-1]["content"]
        last = script.received[script.received.index(cut[-1]) + 1 :]
        assert len(last) > STEPS // 2 and not any(r.truncated for r in last)  # fitted since
        metrics = httpx.get(f"{url}/metrics").text
        assert (
            f'contextwarden_upstream_truncations_total{{model="other",team="default"}} {len(cut)}.0'
            in metrics
        )
