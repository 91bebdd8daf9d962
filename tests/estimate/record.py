"""Record the fixtures of tests/estimate: a real Claude Code session (a task, its own
``/compact``, the task again) and a Codex one, through the proxy against the scripted upstream of tests/clients, keeping the transcript files the CLI
wrote under its ``HOME`` and the bodies it sent the proxy (``sent.txt``: bodies.py, all but
the request that made Claude Code's summary)::

    PYTHONPATH=$PWD python -m tests.estimate.record OUT_DIR

The clients are those of tests/clients (``npm ci --prefix tests/clients``)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.clients.conftest import BIN, TASK, Agent, Recorder, write_steps
from tests.clients.scripted import Script, create_scripted
from tests.estimate import bodies

CLAUDE, CODEX = "claude-opus-4-8", "gpt-6.1-sol"
# Small windows over small steps: a few trims in a short session (the prompts and tools are
# about 18,600 and 11,700 tokens by the upstream's count).
SESSIONS = {CLAUDE: (18_600 + 3_000, 5), CODEX: (11_700 + 3_500, 8)}
LINES = 30
COMPACTING = b"REMINDER: Do NOT call any tools"  # Claude Code's summarizing request


def agent(root: Path, model: str) -> tuple[Agent, Any]:
    window, steps = SESSIONS[model]
    script = Script(steps=steps, window=window)
    upstream = BackgroundServer(create_scripted(script))
    upstream.__enter__()
    apis = ["chat_completions", "responses", "messages"]
    config: dict[str, Any] = {
        "upstreams": {"scripted": {"base_url": f"{upstream.url}/v1", "apis": apis}},
        "default_upstream": "scripted",
        "data_dir": str(root / "data"),
        "models": {model: {"context_window": window}},
    }
    recorder = Recorder(create_app(load_settings(None, **config)))
    proxy = BackgroundServer(recorder)
    proxy.__enter__()
    work, home = root / "work", root / "home"
    work.mkdir()
    home.mkdir()
    write_steps(work, steps, LINES)
    return Agent(script, recorder, proxy.url, upstream.url, work, home), (proxy, upstream)


def claude(a: Agent) -> None:
    """The task, Claude Code's own compaction (``/compact``), and the task again after it."""
    (a.home / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
    env = {
        "ANTHROPIC_BASE_URL": a.proxy_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    argv = [str(BIN / "claude"), "--allowedTools", "Bash(cat:*)", "-p"]
    for asked in ([TASK], ["/compact", "--continue"], [f"{TASK}, after compaction", "--continue"]):
        run = a.run([*argv, *asked], env)
        assert run.returncode == 0, run


def codex(a: Agent) -> None:
    home = a.home / ".codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "contextwarden"\n[model_providers.contextwarden]\n'
        f'name = "contextwarden"\nbase_url = "{a.proxy_url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )
    argv = [str(BIN / "codex"), "exec", "--skip-git-repo-check"]
    argv += ["--dangerously-bypass-approvals-and-sandbox", TASK]
    run = a.run(argv, {"OPENAI_API_KEY": "sk-test", "CODEX_HOME": str(home)})
    assert run.returncode == 0, run


def record(out: Path, model: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, servers = agent(Path(tmp), model)
        try:
            (claude if model == CLAUDE else codex)(a)
        finally:
            for server in servers:
                server.__exit__(None, None, None)
        target = out / ("claude-code" if model == CLAUDE else "codex")
        target.mkdir(parents=True)
        written = [
            *a.home.glob(".claude/projects/*/*.jsonl"),
            *a.home.glob(".codex/sessions/**/*.jsonl"),
        ]
        for transcript in written:
            shutil.copy(transcript, target / transcript.name)
        # The request that made Claude Code's own summary is in no transcript: left out (the
        # summary it answered is in the transcript, and so is what followed it).
        kept = [(p, b) for p, b in a.recorder.sent if COMPACTING not in orjson.dumps(b)]
        bodies.write(target / "sent.txt", kept)


if __name__ == "__main__":
    for m in (CLAUDE, CODEX):
        record(Path(sys.argv[1]), m)
