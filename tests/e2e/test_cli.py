"""The README's commands: `contextwarden serve` on the embedded default, and the demo."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from proxy.demo.run import run_demo
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.topology import free_port


@pytest.mark.slow
def test_serve_on_the_embedded_default_config_forwards_to_openai_base_url(tmp_path: Path) -> None:
    upstream_app = create_upstream(window=4096)
    with BackgroundServer(upstream_app) as upstream:
        port = free_port()
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"{upstream.url}/v1",
            "OPENAI_API_KEY": "sk-x",
            "CONTEXTWARDEN_DATA_DIR": str(tmp_path),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"serve did not start: {proc.stderr.read() if proc.stderr else ''!r}"
                    )
                time.sleep(0.1)
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
            response = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body)
            assert response.status_code == 200
            assert int(response.headers["x-contextwarden-budget"]) > 100_000  # litellm's table
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            said = proc.stderr.read().decode() if proc.stderr else ""
            if proc.stderr:
                proc.stderr.close()
    # The banner says what it serves: where to point clients, the config, the upstreams.
    assert f"contextwarden on http://127.0.0.1:{port}" in said
    assert "config: the embedded default" in said
    assert f"openai ({upstream.url}/v1)" in said
    # And one access log line, JSON, for the request it forwarded.
    logged = [json.loads(line) for line in said.splitlines() if line.startswith("{")]
    assert [(x["model"], x["status"], x["format"]) for x in logged] == [
        ("gpt-4o-mini", 200, "chat")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["responses", "anthropic"])
def test_demo_drives_the_agent_formats(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    assert run_demo(turns=14, window=1024, fmt=fmt) == 0
    out = capsys.readouterr().out
    assert f"({fmt})" in out
    # A summary was used (made by the request, or prepared in the background and reused); the
    # actions beside it (a sticky replay, an overflow retry, whole turns dropped) depend on the
    # demo upstream's random ids and on when the background summary is ready.
    assert re.search(r"summarize[\w,-]* \(checkpoint (created|reused) ", out)
    assert out.count("\n") > 14


def test_every_command_and_option_has_help() -> None:
    import argparse

    from proxy.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helped = {c.dest for c in commands._choices_actions if c.help}
    assert helped == set(commands.choices)
    assert helped == {
        "serve",
        "check-config",
        "demo",
        "preview",
        "client-setup",
        "windows",
        "capabilities",
        "estimate",
    }
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"{name} {action.dest} has no help"


@pytest.mark.slow
def test_the_demo_upstream_runs_alone_as_the_readme_says() -> None:
    """The README's command for the demo's upstream on its own: it answers, and refuses a
    prompt over its 2048-token window in the provider's own words."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    command = re.search(r"`(uvicorn proxy\.demo\.upstream:create_upstream [^`]*)`", readme)
    assert command is not None
    port = free_port()
    argv = command.group(1).replace("--port 8001", f"--port {port}").split()
    assert argv[-1] == str(port)
    proc = subprocess.Popen(
        [sys.executable, "-m", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/models")
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    stderr = proc.stderr.read() if proc.stderr else b""
                    pytest.fail(f"it did not start: {stderr!r}")
                time.sleep(0.1)
        short = [{"role": "user", "content": "hi"}]
        long = [{"role": "user", "content": "word " * 2100}]
        chat = {"model": "m", "max_tokens": 16}
        assert httpx.post(f"{url}/chat/completions", json={**chat, "messages": short}).is_success
        refused = httpx.post(f"{url}/chat/completions", json={**chat, "messages": long})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "context_length_exceeded"
        # Its first Messages request loads Anthropic's tokenizer: seconds on a loaded machine.
        over = httpx.post(f"{url}/messages", json={**chat, "messages": long}, timeout=120)
        assert over.status_code == 400 and over.json()["type"] == "error"
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()
