"""The preview takes all three formats, told from the body's shape (or ``?format=``, or the
CLI's ``--format``), and gives the figures the real request path gives for the same body. It
took chat only: a Responses body was "'messages' is required", an Anthropic one was planned as
chat with its ``system`` ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.cli import main
from tests.e2e.conftest import MODEL, Stack, StackFactory

CLAUDE = "claude-demo"
FILLER = "the build failed in module {k} because an import is missing; "


def chat_body() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for k in range(12):
        messages += [
            {"role": "user", "content": FILLER.format(k=k) * 6},
            {"role": "assistant", "content": "Noted. " * 20},
        ]
    messages.append({"role": "user", "content": "What failed?"})
    return {"model": MODEL, "messages": messages, "max_tokens": 64}


def responses_body() -> dict[str, Any]:
    body = chat_body()
    items = [m for m in body["messages"] if m["role"] != "system"]
    return {"model": MODEL, "instructions": "Be brief.", "input": items, "max_output_tokens": 64}


def anthropic_body() -> dict[str, Any]:
    body = chat_body()
    messages = [m for m in body["messages"] if m["role"] != "system"]
    return {"model": CLAUDE, "system": "Be brief.", "messages": messages, "max_tokens": 64}


BODIES = {
    "chat": ("/v1/chat/completions", chat_body),
    "responses": ("/v1/responses", responses_body),
    "anthropic": ("/v1/messages", anthropic_body),
}
FIGURES = ("tokens_before", "tokens_after", "budget")


def stack_for(make_stack: StackFactory) -> Stack:
    models = {
        MODEL: {"context_window": 1024, "tokenizer": "o200k_base"},
        CLAUDE: {"context_window": 1024, "tokenizer": "estimate"},
    }
    apis = ["chat_completions", "responses", "messages"]
    return make_stack(window=4096, models=models, apis=apis)


@pytest.mark.parametrize("fmt", list(BODIES))
def test_the_preview_agrees_with_the_request_path(make_stack: StackFactory, fmt: str) -> None:
    stack = stack_for(make_stack)
    path, make = BODIES[fmt]
    body = make()
    preview = httpx.post(f"{stack.proxy_url}/v1/contextwarden/preview", json=body)
    assert preview.status_code == 200, preview.text
    report = preview.json()["report"]
    assert report["format"] == fmt
    real = httpx.post(f"{stack.proxy_url}{path}", json=body, headers={"x-api-key": "sk"})
    assert real.status_code == 200, real.text
    for name in FIGURES:
        assert str(report[name]) == real.headers[f"x-contextwarden-{name.replace('_', '-')}"]
    assert report["actions"] != ["none"]  # the body is over the window: it was trimmed


@pytest.mark.parametrize("fmt", list(BODIES))
def test_the_cli_preview_tells_the_format_from_the_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "upstreams:\n  demo:\n    base_url: http://127.0.0.1:9/v1\n"
        "    apis: [chat_completions, responses, messages]\n"
        "default_upstream: demo\n"
        f"data_dir: {tmp_path / 'data'}\n"
        "models:\n"
        f"  {MODEL}: {{context_window: 1024, tokenizer: o200k_base}}\n"
        f"  {CLAUDE}: {{context_window: 1024, tokenizer: estimate}}\n"
    )
    path = tmp_path / "body.json"
    path.write_bytes(orjson.dumps(BODIES[fmt][1]()))
    assert main(["preview", str(path), "--config", str(config), "--json"]) == 0
    report = orjson.loads(capsys.readouterr().out)["report"]
    assert report["format"] == fmt
    assert report["tokens_after"] <= report["budget"] < report["tokens_before"]
