"""Exact at the edge (#54): a Codex request the upstream would take is never refused by the
proxy, and its count is in the upstream's units.

``codex_0171_step2.json`` is a real body: the current Codex (0.171.0, tests/clients/current)
with its default model ``gpt-6.2-sol`` and the repo's provider config (tests/clients/
test_codex.py: ``codex``), captured through the proxy in front of the scripted upstream: its
second request, the built-in tools item (``additional_tools``: the ``functions``, ``clock`` and
``collaboration`` namespaces, a custom ``exec`` tool among them), the developer messages, the
task and one step. The scripted upstream counts it at 15,816 tokens (tests/clients/scripted.py:
``_responses_tokens``, the tests' "upstream's count"), under a 16,000-token window. The proxy
refused it before ("keeping the leading system/developer messages ... whole ... reply reserve
4000"): it estimated ``gpt-6*`` (no tokenizer known) at 1.2 times a cl100k count plus 2 a
message, 19,594 tokens, more than the 19,200 its estimate allowance gave the window.
"""

from __future__ import annotations

import copy
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.responses import ResponsesCounter
from proxy.demo.servers import BackgroundServer
from tests.clients.scripted import Script, _responses_tokens, create_scripted
from tests.conftest import assert_no_plan_fallbacks

BODY = Path(__file__).with_name("codex_0171_step2.json")
MODEL = "gpt-6.2-sol"
WINDOW = 16_000
APIS = ["chat_completions", "responses", "messages"]
HEADERS = {"authorization": "Bearer sk-test"}
UPSTREAM = ResponsesCounter("o200k_base")


def body() -> dict[str, Any]:
    payload: dict[str, Any] = orjson.loads(BODY.read_bytes())
    payload["stream"] = False
    return payload


def theirs(payload: dict[str, Any]) -> int:
    """The upstream's count (the scripted upstream's, which refuses over its window)."""
    return _responses_tokens(UPSTREAM, payload)


def prefix(payload: dict[str, Any]) -> list[Any]:
    items: list[Any] = payload["input"]
    return items[: next(i for i, item in enumerate(items) if item.get("role") == "user")]


def with_steps(payload: dict[str, Any], steps: int) -> dict[str, Any]:
    """``payload`` with ``steps`` more steps like its last one (reasoning, the ``exec`` call,
    its output), each reading another file."""
    out = copy.deepcopy(payload)
    last = out["input"][-3:]
    for k in range(steps):
        step = copy.deepcopy(last)
        for item in step:
            item["id"] = f"{item['id'][:4]}{k:04d}{item['id'][8:]}"
            if "call_id" in item:
                item["call_id"] = f"call_more{k:04d}"
        name = f"step-{k + 2:02d}"
        step[1]["input"] = step[1]["input"].replace("step-01", name)
        for part in step[2]["output"]:
            part["text"] = part["text"].replace("step 01", f"step {k + 2:02d}")
        out["input"] += step
    return out


def stack_for(
    stack: ExitStack, tmp_path: Path, models: dict[str, Any]
) -> tuple[Script, Any, httpx.Client]:
    script = Script(steps=40, window=WINDOW)
    upstream = stack.enter_context(BackgroundServer(create_scripted(script)))
    config: dict[str, Any] = {
        "upstreams": {"scripted": {"base_url": f"{upstream.url}/v1", "apis": APIS}},
        "default_upstream": "scripted",
        "data_dir": str(tmp_path / "data"),
        "models": models,
    }
    app = create_app(load_settings(None, **config))
    proxy = stack.enter_context(BackgroundServer(app))
    client = stack.enter_context(httpx.Client(base_url=f"{proxy.url}/v1", timeout=60))
    return script, app, client


def test_its_count_of_codex_is_the_upstreams_within_the_envelopes(tmp_path: Path) -> None:
    """``gpt-6*`` is counted with o200k_base (Codex's default models are OpenAI's): the
    estimate ran 1.23 to 1.27 times the upstream's count for Codex's bodies; now it is over
    by what it charges for the items' envelopes (ids, statuses: 2 to 3 percent)."""
    payload = body()
    config = {"models": {MODEL: {"context_window": 400_000}}}
    with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
        got = httpx.post(
            f"{proxy.url}/v1/contextwarden/preview", json=payload, headers=HEADERS, timeout=60
        )
    assert got.status_code == 200, got.text
    report = got.json()["report"]
    ours = report["tokens_before"] + report["tools_tokens"]
    assert report["count"] == "exact"
    assert theirs(payload) == 15_816
    assert theirs(payload) <= ours <= 1.04 * theirs(payload), ours


def test_a_codex_request_the_upstream_takes_is_forwarded_whole(tmp_path: Path) -> None:
    """The verifier's case: 15,816 tokens by the upstream's count at a 16,000-token window,
    over the window by the proxy's count only by the envelopes it charges. It goes whole (its
    prefix, task and step) and the upstream takes it."""
    payload = body()
    assert theirs(payload) <= WINDOW
    with ExitStack() as stack:
        script, app, client = stack_for(stack, tmp_path, {MODEL: {"context_window": WINDOW}})
        got = client.post("/responses", json=payload, headers=HEADERS)
        assert got.status_code == 200, got.text
        assert not script.refused
        (sent,) = [r.body for r in script.received]
        assert prefix(sent) == prefix(payload)
        assert sent["input"][-4:] == payload["input"][-4:]  # the task and its step
        assert theirs(sent) <= WINDOW
        assert_no_plan_fallbacks(app)


@pytest.mark.parametrize("models", [{MODEL: {"context_window": WINDOW}}, {}])
def test_no_codex_request_the_upstream_takes_alone_is_refused(
    tmp_path: Path, models: dict[str, Any]
) -> None:
    """Codex's request growing step by step, at a 16,000-token window configured (the repo's
    provider config) or not (the README's one-line config: the window is Codex's catalog's
    500,000 until the upstream refuses, without figures, and the proxy learns bounds):
    every request the upstream would take alone is answered through the proxy, and the
    upstream refuses no more than a few in all."""
    with ExitStack() as stack:
        script, app, client = stack_for(stack, tmp_path, models)
        for steps in range(8):
            payload = with_steps(body(), steps)
            alone = theirs(payload) <= WINDOW
            got = client.post("/responses", json=payload, headers=HEADERS)
            assert got.status_code == 200 or not alone, (steps, got.text)
            assert got.status_code == 200, (steps, got.text)  # each one fits, trimmed
            sent = script.received[-1].body
            assert prefix(sent) == prefix(payload)
        assert len(script.refused) <= (0 if models else 3), len(script.refused)
        assert_no_plan_fallbacks(app)
