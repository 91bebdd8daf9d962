"""The README's "Use it with…" snippets, each taken from the README as written and run against
the quick start's proxy: the embedded default config (no file, no override), with
``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` pointing at two scripted upstreams, one playing
OpenAI and one Anthropic, so each request is seen to reach the provider it addressed with the
key its caller sent.

The real Claude Code and Codex CLIs (pinned in package.json) run a two-step task; openai-agents
runs one with its default client; the SDKs make one call of each format; each local-server
line starts the real ``contextwarden serve`` in front of an OpenAI-compatible server. Only the
address changes: the snippets' ``127.0.0.1:8080`` (or a local server's port) becomes the test's
loopback port.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.cli import banner
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.clients.conftest import RELEASES, TASK, Recorder, Run, client, write_steps
from tests.clients.scripted import Script, create_scripted
from tests.conftest import assert_no_plan_fallbacks
from tests.e2e.topology import free_port

README = Path(__file__).resolve().parents[2] / "README.md"
PROXY = "http://127.0.0.1:8080"
STEPS = 2
ANTHROPIC_KEY = "sk-ant-caller"
OPENAI_KEY = "sk-openai-caller"
# What keeps a CLI off the internet in a test (the user's own runs may phone home).
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
LABELS = {
    "Claude Code",
    "Codex CLI",
    "openai-agents",
    "The `openai` SDK",
    "The `anthropic` SDK",
    "A local server",
}


def snippets() -> dict[str, tuple[str, str]]:
    """The section's snippets by their bold label: (language, text)."""
    section = README.read_text().split("## Use it with…\n", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"^\*\*(.+?)\*\*.*?^```(\w+)\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    return {label: (language, text) for label, language, text in found}


def snippet(label: str) -> str:
    return snippets()[label][1]


def test_every_snippet_is_run_here_and_is_at_most_three_lines() -> None:
    found = snippets()
    assert set(found) == LABELS
    for label, (_, text) in found.items():
        lines = [line for line in text.splitlines() if line.strip()]
        assert len(lines) <= 3, label


def command(line: str) -> tuple[dict[str, str], list[str]]:
    """A shell line's leading ``NAME=value`` assignments and the command after them."""
    words = shlex.split(line, comments=True)
    env = {}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


@dataclass
class QuickStart:
    """The quick start's proxy in front of two scripted upstreams (OpenAI's and Anthropic's
    roles), a task directory and a home for a client."""

    url: str
    openai: Script
    anthropic: Script
    recorder: Recorder
    work: Path
    home: Path

    def run(self, argv: list[str], env: dict[str, str]) -> Run:
        base = {"PATH": os.environ["PATH"], "HOME": str(self.home), "LANG": "C.UTF-8"}
        done = subprocess.run(
            argv,
            cwd=self.work,
            env={**base, **QUIET, **env},
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
        return Run(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def quick_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[QuickStart]:
    openai_role, anthropic_role = Script(STEPS, 200_000), Script(STEPS, 200_000)
    with ExitStack() as stack:
        openai_up = stack.enter_context(BackgroundServer(create_scripted(openai_role)))
        anthropic_up = stack.enter_context(BackgroundServer(create_scripted(anthropic_role)))
        # The proxy's shell: the providers' addresses, no key of its own.
        monkeypatch.setenv("OPENAI_BASE_URL", f"{openai_up.url}/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_up.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path / "data"))
        recorder = Recorder(create_app(load_settings()))
        proxy = stack.enter_context(BackgroundServer(recorder))
        # The clients' shell: their own keys, and no provider address of the proxy's.
        monkeypatch.delenv("OPENAI_BASE_URL")
        monkeypatch.delenv("ANTHROPIC_BASE_URL")
        work, home = tmp_path / "work", tmp_path / "home"
        work.mkdir()
        home.mkdir()
        write_steps(work, STEPS)
        yield QuickStart(proxy.url, openai_role, anthropic_role, recorder, work, home)
        assert_no_plan_fallbacks(recorder.app)


def headers_of(script: Script) -> list[dict[str, str]]:
    return [r.headers for r in script.received + script.summaries]


def credentials(script: Script) -> set[tuple[str, str]]:
    """Every (header, value) credential an upstream was sent."""
    return {
        (name, value)
        for h in headers_of(script)
        for name, value in h.items()
        if name in ("authorization", "x-api-key", "api-key")
    }


@pytest.mark.parametrize("release", RELEASES)
def test_claude_code(quick_start: QuickStart, release: str) -> None:
    env, argv = command(snippet("Claude Code").replace(PROXY, quick_start.url))
    assert argv == ["claude"]
    (quick_start.home / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
    task = ["-p", TASK, "--allowedTools", "Bash(cat:*)"]
    run = quick_start.run(
        [str(client("claude", release)), *task], {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, **env}
    )
    assert run.returncode == 0, run
    assert f"Done after {STEPS} steps" in run.stdout, run
    # Its default model (in no table) went to Anthropic's upstream with its own key, as sent.
    received = quick_start.anthropic.received
    assert len(received) == STEPS + 1 and not quick_start.anthropic.refused
    assert all(r.path == "messages" for r in received)
    assert credentials(quick_start.anthropic) == {("x-api-key", ANTHROPIC_KEY)}
    assert not quick_start.openai.received and not quick_start.openai.summaries


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
def test_codex(quick_start: QuickStart, release: str) -> None:
    codex_home = quick_start.home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(snippet("Codex CLI").replace(PROXY, quick_start.url))
    codex = str(client("codex", release))
    saved = subprocess.run(  # the user's key, saved as Codex's own sign-in
        [codex, "login", "--with-api-key"],
        input=f"{OPENAI_KEY}\n",
        env={"PATH": os.environ["PATH"], "HOME": str(quick_start.home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "saved" in saved.stderr + saved.stdout
    argv = [codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    run = quick_start.run([*argv, TASK], {})
    assert run.returncode == 0, run
    assert f"Done after {STEPS} steps" in run.stdout, run
    # Its session went over the WebSocket the proxy accepted (a refused handshake had it
    # retry five times, about 6 s, on every run; a 426 had it log an ERROR line).
    assert "Reconnecting" not in run.stdout + run.stderr, run
    received = quick_start.openai.received
    assert len(received) == STEPS + 1 and not quick_start.openai.refused
    assert all(r.path == "responses" for r in received)
    assert credentials(quick_start.openai) == {("authorization", f"Bearer {OPENAI_KEY}")}
    assert not quick_start.anthropic.received and not quick_start.anthropic.summaries


@dataclass
class Frames:
    """A proxy's WebSocket traffic: each handshake's path and how it was answered (``accept``,
    or a denial's status), and each text frame each way, in order."""

    handshakes: list[tuple[str, str]]
    client: list[dict[str, Any]]
    server: list[dict[str, Any]]


@contextmanager
def watching(quick_start: QuickStart) -> Iterator[Frames]:
    frames = Frames([], [], [])
    app = quick_start.recorder.app

    async def watched(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await app(scope, receive, send)
            return

        async def receiving() -> Any:
            message = await receive()
            if message["type"] == "websocket.receive" and message.get("text"):
                frames.client.append(orjson.loads(message["text"]))
            return message

        async def sending(message: Any) -> None:
            if message["type"] == "websocket.accept":
                frames.handshakes.append((scope["path"], "accept"))
            elif message["type"] == "websocket.http.response.start":
                frames.handshakes.append((scope["path"], str(message["status"])))
            elif message["type"] == "websocket.send" and message.get("text"):
                frames.server.append(orjson.loads(message["text"]))
            await send(message)

        await app(scope, receiving, sending)

    quick_start.recorder.app = watched
    try:
        yield frames
    finally:
        quick_start.recorder.app = app  # the fixture's checks read the proxy's own app


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("provider", ["built-in", "its own", "its own, with websockets"])
def test_codex_answers_over_the_websocket(
    quick_start: QuickStart, release: str, provider: str
) -> None:
    """docs/codex.md: with the README's line (the built-in provider) Codex opens a WebSocket
    first; the proxy accepts it and serves the session over it, no reconnect and no ERROR
    line; so does a provider of its own that says ``supports_websockets = true``. One that
    does not never opens one, and goes by HTTPS."""
    with watching(quick_start) as frames:
        started = time.perf_counter()
        run = codex_run(quick_start, release, provider)
        took = time.perf_counter() - started
    assert run.returncode == 0 and f"Done after {STEPS} steps" in run.stdout, run
    said = run.stdout + run.stderr
    errors = [line for line in said.splitlines() if " ERROR " in line]
    assert errors == [] and "Reconnecting" not in said, run
    print(f"codex exec ({release}, {provider}): {took:.2f} s")
    received = quick_start.openai.received
    assert len(received) == STEPS + 1  # the warm-up reaches no upstream
    sent = [body for path, body in quick_start.recorder.sent if path == "/v1/responses"]
    if provider == "its own":
        assert frames.handshakes == [] and frames.client == [], run
        return
    # Every request came over the WebSocket: a frame each, its warm-up first (answered by
    # the proxy), each later one naming the response before it and sending only new items.
    assert frames.handshakes == [("/v1/responses", "accept")], run
    asked = [f for f in frames.client if f["type"] == "response.create"]
    assert asked[0].get("generate") is False
    generating = [f for f in asked if f.get("generate", True)]
    assert len(generating) == len(sent) == STEPS + 1
    assert all("previous_response_id" in f for f in generating)
    # The upstream got each request whole: the input the connection rebuilt, item for item.
    assert [r.body["input"] for r in received] == [body["input"] for body in sent]
    assert not any("previous_response_id" in r.body for r in received)


def codex_run(quick_start: QuickStart, release: str, provider: str) -> Run:
    """``codex exec`` on the task, with the README's line or a provider of its own."""
    codex_home = quick_start.home / ".codex"
    codex_home.mkdir()
    env = {"OPENAI_API_KEY": OPENAI_KEY}
    if provider == "built-in":
        config = snippet("Codex CLI").replace(PROXY, quick_start.url)
    else:
        config = (
            'model_provider = "contextwarden"\n[model_providers.contextwarden]\n'
            f'name = "contextwarden"\nbase_url = "{quick_start.url}/v1"\n'
            'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        )
        if provider.endswith("with websockets"):
            config += "supports_websockets = true\n"
    (codex_home / "config.toml").write_text(config)
    if provider == "built-in":
        subprocess.run(  # the user's key, saved as Codex's own sign-in
            [str(client("codex", release)), "login", "--with-api-key"],
            input=f"{OPENAI_KEY}\n",
            env={"PATH": os.environ["PATH"], "HOME": str(quick_start.home)},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        env = {}
    argv = [str(client("codex", release)), "exec", "--skip-git-repo-check"]
    return quick_start.run([*argv, "--dangerously-bypass-approvals-and-sandbox", TASK], env)


async def test_openai_agents(quick_start: QuickStart, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.models import _openai_shared
    from agents.tracing import trace
    from agents.tracing.traces import NoOpTrace

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    before = _openai_shared.get_default_openai_client()
    set_tracing_disabled(False)  # the SDK's default: the snippet as written turns it off
    try:
        exec(snippet("openai-agents").replace(PROXY, quick_start.url), {})
        # Else the SDK posts the run's prompts and tool outputs to OpenAI, around the proxy.
        assert isinstance(trace("run"), NoOpTrace)
        work = quick_start.work

        @function_tool
        def read_file(path: str) -> str:
            """Read a file of the task's directory."""
            return (work / Path(path).name).read_text()

        coder = Agent(name="coder", instructions="Read what you are asked.", tools=[read_file])
        result = await Runner.run(coder, TASK, max_turns=STEPS + 3)
    finally:
        set_tracing_disabled(True)  # no test sends traces to OpenAI
        made = _openai_shared.get_default_openai_client()
        _openai_shared.set_default_openai_client(before)  # type: ignore[arg-type]
        if made is not None and made is not before:
            # The snippet's client, closed in this test's event loop: left to the garbage
            # collector, its open connection was reported in the next test's set-up.
            await made.close()
    assert result.final_output.startswith(f"Done after {STEPS} steps")
    received = quick_start.openai.received
    assert len(received) == STEPS + 1 and all(r.path == "responses" for r in received)
    assert credentials(quick_start.openai) == {("authorization", f"Bearer {OPENAI_KEY}")}
    assert not quick_start.anthropic.received


def test_the_sdks(quick_start: QuickStart, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    names: dict[str, Any] = {}
    exec(snippet("The `openai` SDK").replace(PROXY, quick_start.url), names)
    openai_client = names["client"]
    tool = {"name": "read_file", "parameters": {"type": "object", "properties": {}}}
    chat = openai_client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": TASK}],
        tools=[{"type": "function", "function": tool}],
    )
    assert chat.choices[0].message.tool_calls[0].function.name == "read_file"
    response = openai_client.responses.create(
        model="gpt-4.1", input=TASK, tools=[{"type": "function", **tool}]
    )
    assert [o.type for o in response.output] == ["reasoning", "function_call"]
    names = {}
    exec(snippet("The `anthropic` SDK").replace(PROXY, quick_start.url), names)
    message = names["client"].messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, messages=[{"role": "user", "content": TASK}]
    )
    assert message.content[0].text.startswith("Done after")
    assert [r.path for r in quick_start.openai.received] == ["chat", "responses"]
    assert [r.path for r in quick_start.anthropic.received] == ["messages"]
    # Each key reached only its provider, in the header its SDK sent it in (this anthropic
    # SDK sends its key as a bearer token, which Anthropic's API takes too).
    assert credentials(quick_start.openai) == {("authorization", f"Bearer {OPENAI_KEY}")}
    assert credentials(quick_start.anthropic) == {("authorization", f"Bearer {ANTHROPIC_KEY}")}


def test_a_local_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line puts the quick start's proxy in front of an OpenAI-compatible server standing
    in for the local one, and a chat request goes through it to that server. The first line
    runs as written: the real ``contextwarden serve`` (the README's ``.venv/bin`` is this
    environment's); the others, which differ only in their variable, run the same load of the
    embedded default in this process (three proxies starting at once take a while on two
    cores)."""
    lines = [line for line in snippet("A local server").splitlines() if line.strip()]
    assert len(lines) == 3
    for k, line in enumerate(lines):
        env, argv = command(line)
        assert argv == [".venv/bin/contextwarden", "serve"], line
        assert list(env) == ["OPENAI_BASE_URL"], line
        with ExitStack() as stack:
            local = create_upstream(window=8192)
            server = stack.enter_context(BackgroundServer(local))
            address = re.sub(r"/v1$", "", env["OPENAI_BASE_URL"])
            env = {name: value.replace(address, server.url) for name, value in env.items()}
            data = tmp_path / str(k)
            if k == 0:
                proxy, said = stack.enter_context(serving_cli(argv, env, data))
            else:
                for name, value in env.items():
                    monkeypatch.setenv(name, value)
                monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(data))
                said = partial(banner, load_settings(), None)
                proxy = stack.enter_context(BackgroundServer(create_app(load_settings()))).url
            body = {"model": "llama3.1:8b", "messages": [{"role": "user", "content": "hi"}]}
            answer = httpx.post(f"{proxy}/v1/chat/completions", json=body, timeout=60)
            assert answer.status_code == 200, answer.text
            assert [r["model"] for r in local.state.received] == ["llama3.1:8b"]
            assert f"upstreams: openai ({server.url}/v1)" in said()


@contextmanager
def serving_cli(
    argv: list[str], env: dict[str, str], data: Path
) -> Iterator[tuple[str, Callable[[], str]]]:
    """The real ``contextwarden`` command on a free port: its URL, and what it printed."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    with (data.parent / f"{data.name}-serve.txt").open("w+") as said:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "contextwarden"), *argv[1:]],
            env={
                **clean,
                **env,
                "CONTEXTWARDEN_PORT": str(port),
                "CONTEXTWARDEN_DATA_DIR": str(data),
            },
            stdout=subprocess.DEVNULL,
            stderr=said,
            text=True,
        )
        try:
            wait_healthy(proc, port, said)

            def printed() -> str:
                said.seek(0)
                return said.read()

            yield f"http://127.0.0.1:{port}", printed
        finally:
            stop(proc)


def wait_healthy(proc: subprocess.Popen[str], port: int, said: TextIO) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            said.seek(0)
            pytest.fail(f"serve did not start: {said.read()}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=15)
