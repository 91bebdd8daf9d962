"""docs/recipes.md: each recipe's config on its own, as written, passes ``check-config``, and a
proxy serving it (its provider addresses swapped for loopback servers standing in for them)
does what the recipe says: keys reach the right upstream, teams get their models and caps,
the agent CLIs run, documents are dropped by relevance, replicas share their state."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from proxy.app import create_app
from proxy.cli import main
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.clients.scripted import Script, create_scripted
from tests.conftest import assert_no_plan_fallbacks

RECIPES = Path(__file__).resolve().parents[1] / "docs" / "recipes.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
OPENAI = "https://api.openai.com/v1"
ANTHROPIC = "https://api.anthropic.com/v1"
TIMEOUT = 60  # the first request waits for the proxy's start-up work, on a busy machine
TOOL = {"name": "read_file", "parameters": {"type": "object", "properties": {}}}
CHAT_TOOLS = [{"type": "function", "function": TOOL}]


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, timeout=TIMEOUT, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, timeout=TIMEOUT, **kwargs)


def recipes() -> dict[str, str]:
    """Each recipe's heading and its config (the section's YAML block)."""
    sections = re.split(r"^## ", RECIPES.read_text(), flags=re.MULTILINE)[1:]
    out = {}
    for section in sections:
        title = section.splitlines()[0].strip()
        yaml_blocks = [body for lang, body in FENCE.findall(section) if lang == "yaml"]
        assert len(yaml_blocks) == 1, title
        out[title] = yaml_blocks[0]
    return out


def test_every_recipe_is_tested_here() -> None:
    assert set(recipes()) == {
        "Passthrough",
        "Keys mode with teams",
        "Agent CLIs for a team",
        "Local models",
        "RAG",
        "Replicas",
    }


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """``serve(title, swaps)``: the recipe checked alone, then served with its addresses
    swapped (``swaps``: what the recipe says -> the loopback server's); the proxy's URL."""
    with ExitStack() as stack:
        apps: list[Any] = []

        def start(title: str, swaps: dict[str, str] | None = None) -> str:
            text = recipes()[title]
            original = tmp_path / f"{len(apps)}-as-written.yaml"
            original.write_text(text)
            assert main(["check-config", str(original)]) == 0
            for said, local in (swaps or {}).items():
                text = text.replace(said, local)
            served = tmp_path / f"{len(apps)}-served.yaml"
            served.write_text(text)
            data = str(tmp_path / f"data-{len(apps)}")
            app = create_app(load_settings(served, data_dir=data))
            apps.append(app)
            return stack.enter_context(BackgroundServer(app)).url

        yield start
        for app in apps:
            assert_no_plan_fallbacks(app)


def scripted(stack: ExitStack) -> tuple[Script, str]:
    script = Script(steps=2, window=200_000)
    return script, stack.enter_context(BackgroundServer(create_scripted(script))).url


def credentials(script: Script) -> set[tuple[str, str]]:
    return {
        (name, value)
        for r in script.received + script.summaries
        for name, value in r.headers.items()
        if name in ("authorization", "x-api-key", "api-key")
    }


def chat(url: str, key: str, model: str = "gpt-4.1", **more: Any) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "go"}], "tools": CHAT_TOOLS}
    return post(
        f"{url}/v1/chat/completions",
        json={**body, **more},
        headers={"authorization": f"Bearer {key}"},
    )


def messages(url: str, headers: dict[str, str], model: str = "claude-sonnet-4-6") -> httpx.Response:
    body = {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "go"}]}
    return post(f"{url}/v1/messages", json=body, headers=headers)


def test_passthrough(serve: Callable[..., str]) -> None:
    with ExitStack() as stack:
        openai, openai_url = scripted(stack)
        anthropic, anthropic_url = scripted(stack)
        proxy = serve("Passthrough", {OPENAI: f"{openai_url}/v1", ANTHROPIC: f"{anthropic_url}/v1"})
        assert chat(proxy, "sk-caller").status_code == 200
        answer = messages(proxy, {"x-api-key": "sk-ant-caller", "anthropic-version": "2023-06-01"})
        assert answer.status_code == 200, answer.text
        assert credentials(openai) == {("authorization", "Bearer sk-caller")}
        assert credentials(anthropic) == {("x-api-key", "sk-ant-caller")}


def test_keys_mode_with_teams(serve: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "OPENAI_API_KEY": "sk-operator",
        "SEARCH_TEAM_KEY": "cw-search",
        "ASSISTANT_TEAM_KEY": "cw-assistants",
        "CW_ADMIN_KEY": "cw-admin",
    }.items():
        monkeypatch.setenv(name, value)
    with ExitStack() as stack:
        openai, openai_url = scripted(stack)
        proxy = serve("Keys mode with teams", {OPENAI: f"{openai_url}/v1"})
        assert chat(proxy, "cw-search", "gpt-4.1-mini").status_code == 200
        assert chat(proxy, "cw-assistants", "gpt-4.1").status_code == 200
        assert chat(proxy, "cw-search", "gpt-4.1").status_code == 403
        assert chat(proxy, "cw-nobody").status_code == 401
        # The search team's cap: a 30,000-token conversation leaves at 16,000 at most.
        long = [
            {"role": "user", "content": f"turn {k}: " + "lorem ipsum " * 300} for k in range(40)
        ]
        capped = chat(proxy, "cw-search", "gpt-4.1-mini", messages=long)
        assert capped.status_code == 200
        assert int(capped.headers["x-contextwarden-tokens-before"]) > 16_000
        assert int(capped.headers["x-contextwarden-tokens-after"]) <= 16_000
        assert credentials(openai) == {("authorization", "Bearer sk-operator")}
        stats = get(f"{proxy}/admin/stats", headers={"authorization": "Bearer cw-admin"})
        assert set(stats.json()["teams"]) >= {"search", "assistants"}


def test_agent_clis_for_a_team(
    serve: Callable[..., str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The real Claude Code, as the recipe's line runs it, with the team's key: the operator's
    key reaches Anthropic's upstream, the team's never does."""
    from tests.clients.conftest import TASK, client, write_steps
    from tests.clients.test_use_it_with import QUIET, command

    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-operator")
    monkeypatch.setenv("CODERS_KEY", "cw-coders")
    section = RECIPES.read_text().split("## Agent CLIs for a team", 1)[1].split("\n## ", 1)[0]
    line = next(body for lang, body in FENCE.findall(section) if lang == "sh")
    with ExitStack() as stack:
        openai, openai_url = scripted(stack)
        anthropic, anthropic_url = scripted(stack)
        proxy = serve(
            "Agent CLIs for a team", {OPENAI: f"{openai_url}/v1", ANTHROPIC: f"{anthropic_url}/v1"}
        )
        env, argv = command(os.path.expandvars(line.replace("http://127.0.0.1:8080", proxy)))
        assert argv == ["claude"] and env["ANTHROPIC_API_KEY"] == "cw-coders"
        work, home = tmp_path / "work", tmp_path / "home"
        work.mkdir()
        home.mkdir()
        write_steps(work, 2)
        (home / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
        done = subprocess.run(
            [str(client("claude")), "-p", TASK, "--allowedTools", "Bash(cat:*)"],
            cwd=work,
            env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", **QUIET, **env},
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Done after 2 steps" in done.stdout
        assert len(anthropic.received) == 3 and not anthropic.refused
        assert credentials(anthropic) == {("x-api-key", "sk-ant-operator")}
        assert not openai.received
        # Its default model, in no table, went through the claude-* family.
        assert {r.body["model"] for r in anthropic.received} == {"claude-opus-4-8"}


def test_local_models(serve: Callable[..., str]) -> None:
    """The stated window is what the proxy fits to: a conversation over it reaches the local
    server trimmed, within 8192 tokens by the server's own count."""
    with ExitStack() as stack:
        local: Starlette = create_upstream(window=8192)
        url = stack.enter_context(BackgroundServer(local)).url
        proxy = serve("Local models", {"http://localhost:11434": url})
        long = [
            {"role": "user", "content": f"turn {k}: " + "lorem ipsum " * 200} for k in range(30)
        ]
        body = {"model": "llama3.1:8b", "messages": long, "max_tokens": 100}
        answer = post(f"{proxy}/v1/chat/completions", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-contextwarden-actions"] != "none"
        assert len(local.state.received[-1]["messages"]) < len(long)


def test_rag(serve: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.strategies.test_relevance_drop import TOPICS, kept_topics, rag

    with ExitStack() as stack:
        upstream: Starlette = create_upstream(window=200_000)
        url = stack.enter_context(BackgroundServer(upstream)).url
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")  # the quick start's upstreams
        proxy = serve("RAG")
        question = "What causes the tides of the oceans?"
        body = {"model": "gpt-4.1-mini", "messages": rag(question, repeat=200), "max_tokens": 100}
        answer = post(
            f"{proxy}/v1/chat/completions",
            json=body,
            headers={"authorization": "Bearer sk-caller", "x-contextwarden-team": "search"},
        )
        assert answer.status_code == 200, answer.text
        assert "relevance_drop" in answer.headers["x-contextwarden-actions"]
        assert int(answer.headers["x-contextwarden-tokens-after"]) <= 8000
        sent = upstream.state.received[-1]["messages"]
        assert "tides" in kept_topics(sent) and len(kept_topics(sent)) < len(TOPICS)
        assert sent[-1]["content"] == question


def test_replicas(
    serve: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas of the recipe on one Redis: what one learns of a window (from the
    upstream's overflow) the other starts with, so its first request fits at once."""
    from tests.e2e.redis_server import redis_server

    with ExitStack() as stack:
        url = stack.enter_context(redis_server(tmp_path))
        upstream: Starlette = create_upstream(window=2048)
        local = stack.enter_context(BackgroundServer(upstream)).url
        monkeypatch.setenv("OPENAI_BASE_URL", f"{local}/v1")  # for a recipe that names none
        swaps = {"redis://localhost:6379/0": url, OPENAI: f"{local}/v1"}
        long = [{"role": "user", "content": f"turn {k}: " + "lorem ipsum " * 40} for k in range(30)]
        body = {"model": "gpt-4.1", "messages": long, "max_tokens": 64}
        headers = {"authorization": "Bearer sk-caller"}
        first = post(f"{serve('Replicas', swaps)}/v1/chat/completions", json=body, headers=headers)
        assert first.status_code == 200, first.text
        assert first.headers["x-contextwarden-retries"] == "1"  # the overflow taught the window
        sent = len(upstream.state.received)
        other = post(f"{serve('Replicas', swaps)}/v1/chat/completions", json=body, headers=headers)
        assert other.status_code == 200, other.text
        assert other.headers["x-contextwarden-retries"] == "0"
        assert len(upstream.state.received) == sent + 1
