"""The real agent CLIs, run as their users run them, through a real proxy on a loopback port.

The clients are the npm packages pinned in ``tests/clients/package.json`` (installed by
``npm ci --prefix tests/clients``, which ``.ci/run`` does). Each runs non-interactively in a
task directory of its own, with an isolated ``HOME`` and no traffic but to the proxy, against
the scripted upstream of ``scripted.py``. In CI a missing client fails the test; elsewhere it
is skipped with the command that installs it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.edge.websocket_session import Asked, Session
from proxy.errors import ProxyError
from tests.clients.metadata import Metadata
from tests.clients.scripted import KEY, Script, Skew, create_scripted
from tests.conftest import assert_no_plan_fallbacks

BIN = Path(__file__).parent / "node_modules" / ".bin"
# The CLIs' current releases, pinned too (current/package.json), beside those of package.json.
CURRENT = Path(__file__).parent / "current" / "node_modules" / ".bin"
RELEASES = ("pinned", "current")
# The issues' own sizes for the long runs (300 steps where CI runs 40), measured by hand:
#     CW_LONG_RUNS=1 pytest -s -n 2 -k "client_setup or strict_upstream" tests/clients
LONG_RUNS = bool(os.environ.get("CW_LONG_RUNS"))
TASK = "read the step files in order"


def client(name: str, release: str = "pinned") -> Path:
    """The CLI ``name`` of ``release``: the pinned one the tests were written with, or the
    current one."""
    folder = BIN if release == "pinned" else CURRENT
    path = folder / name
    if not path.exists():
        where = "tests/clients" if release == "pinned" else "tests/clients/current"
        message = f"{name} ({release}) is not installed: npm ci --prefix {where}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def write_steps(work: Path, steps: int, lines: int = 120, start: int = 1) -> None:
    """``step-NN.txt`` files of ``lines`` distinct lines each (about 2,400 tokens at 120)."""
    for k in range(start, start + steps):
        text = (
            KEY.format(k=k)
            + f"{k * 7919 % 10007:05d}\n"
            + "".join(
                f"step {k} line {i}: the quick brown fox {i * k} jumps over {k} lazy dogs near "
                f"river {i}\n"
                for i in range(lines)
            )
        )
        (work / f"step-{k:02d}.txt").write_text(text)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"exit {self.returncode}\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"


class Recorder:
    """The proxy's app, recording each body a client sends it (in order) before the proxy
    sees it: what a forwarded request is compared with; and each answer's status and bytes,
    as the client received them (``answers``: path, status, body or whole stream). Over a
    Responses WebSocket, the same: each request frame as the whole body it stands for, the
    frames answering it (and ``frames``: each frame the client sent, by path)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.answers: list[tuple[str, int, bytes]] = []
        self.frames: dict[str, list[dict[str, Any]]] = {}  # each WebSocket frame a client sent

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await self.websocket(scope, receive, send)
            return
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        self.sent.append((scope["path"], orjson.loads(body)))
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        status, chunks = 0, []

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        await self.app(scope, replay, sending)
        self.answers.append((scope["path"], status, b"".join(chunks)))

    async def websocket(self, scope: Any, receive: Any, send: Any) -> None:
        """A Responses WebSocket connection (Codex's first transport): each request frame that
        generates is recorded as the whole body it stands for (a follow-up's new items after
        the previous request's input and the output items the client was sent), and the
        frames sent back for it as its answer (their JSON, one a line)."""
        session = Session()
        last: Asked | None = None
        output: list[Any] = []
        frames: list[bytes] = []
        self.frames.setdefault(scope["path"], [])

        async def receiving() -> Any:
            nonlocal last, output
            message = await receive()
            text = message.get("text") if message["type"] == "websocket.receive" else None
            if text:
                self.frames[scope["path"]].append(orjson.loads(text))
                try:
                    asked = session.asked(text)
                except ProxyError:
                    return message
                if asked is not None:
                    last, output = asked, []
                    if asked.generate:
                        self.sent.append((scope["path"], {**asked.body, "stream": True}))
            return message

        async def sending(message: Any) -> None:
            if message["type"] == "websocket.send" and message.get("text"):
                event = orjson.loads(message["text"])
                frames.append(message["text"].encode())
                if event.get("type") == "response.output_item.done":
                    output.append(event["item"])
                elif event.get("type") in ("response.completed", "error", "response.failed"):
                    if event["type"] == "response.completed" and last is not None:
                        session.answered(event["response"]["id"], last, output)
                    status = event.get("status", 200) if event["type"] == "error" else 200
                    self.answers.append((scope["path"], status, b"\n".join(frames)))
                    frames.clear()
            await send(message)

        await self.app(scope, receiving, sending)


@dataclass
class Agent:
    """A scripted upstream, the proxy in front of it, and a task directory for a client."""

    script: Script
    recorder: Recorder
    proxy_url: str
    upstream_url: str
    work: Path
    home: Path

    def sent(self, path: str) -> list[dict[str, Any]]:
        """What the client sent the proxy at ``path``, in order."""
        return [body for at, body in self.recorder.sent if at == path]

    def forwarded(self, path: str) -> list[dict[str, Any]]:
        """What the upstream was sent at ``path`` (``messages``, ``responses``), in order."""
        return [r.body for r in self.script.received if r.path == path]

    def run(self, argv: list[str], env: dict[str, str], timeout: float = 240) -> Run:
        base = {"PATH": os.environ["PATH"], "HOME": str(self.home), "LANG": "C.UTF-8"}
        done = subprocess.run(
            argv,
            cwd=self.work,
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        return Run(done.returncode, done.stdout, done.stderr)


AgentFactory = Callable[..., Agent]


@pytest.fixture
def make_agent(tmp_path: Path) -> Iterator[AgentFactory]:
    with ExitStack() as stack:

        def build(
            window: int,
            steps: int,
            models: list[str] | dict[str, Any],
            policy: dict[str, Any] | None = None,
            lines: int = 120,
            lag: int = 0,
            every: int = 1,
            provider: str = "openai",
            figures: bool = True,
            metadata: Metadata | None = None,
            strict: bool = False,
            upstream: dict[str, Any] | None = None,
            skew: Skew | None = None,
            **settings: Any,
        ) -> Agent:
            """``lines``: of each step file (about 20 tokens a line); ``figures``: False for
            an upstream whose overflow errors state no figures; ``metadata``: a local server's
            metadata endpoints, served by the upstream; ``strict``: an upstream that refuses
            fields it does not know (context_management); ``upstream``: more of its config;
            ``skew``: how its count departs from the demo tokenizer's (scripted.py)."""
            script = Script(
                steps=steps,
                window=window,
                lag=lag,
                every=every,
                figures=figures,
                metadata=metadata,
                strict=strict,
                skew=skew,
            )
            server = stack.enter_context(BackgroundServer(create_scripted(script)))
            apis = ["chat_completions", "responses", "messages"]
            scripted = {"base_url": f"{server.url}/v1", "apis": apis, "provider": provider}
            scripted |= upstream or {}
            config: dict[str, Any] = {
                "upstreams": {"scripted": scripted},
                "default_upstream": "scripted",
                "data_dir": str(tmp_path / "data"),
                "models": models
                if isinstance(models, dict)
                else {m: {"context_window": window} for m in models},
                "policies": {"default": policy or {}},
                **settings,
            }
            recorder = Recorder(create_app(load_settings(None, **config)))
            proxy = stack.enter_context(BackgroundServer(recorder))
            work, home = tmp_path / "work", tmp_path / "home"
            work.mkdir()
            home.mkdir()
            write_steps(work, steps, lines)
            apps.append(recorder.app)
            return Agent(script, recorder, proxy.url, server.url, work, home)

        apps: list[Any] = []
        yield build
        for app in apps:
            assert_no_plan_fallbacks(app)


def never_shown(agent: Agent, name: str) -> None:
    """No answer or stream the client received names ``name``, nor anything it sent."""
    assert agent.recorder.answers
    for path, _, body in agent.recorder.answers:
        assert name.encode() not in body, path
    for path, body in agent.recorder.sent:
        assert name.encode() not in orjson.dumps(body), path


def same(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
