"""``python -m bench.agents``: the pinned agent CLIs' long tasks through the proxy, with figures.

Each run starts the scripted upstream of ``tests/clients`` (it plays the model for a task of N
steps, each reading a step file, and refuses what the real APIs refuse, an over-window prompt
first) and the proxy at its defaults in front of it, with the client's model listed at the
window, then runs the real CLI pinned in ``tests/clients/package.json`` (``npm ci --prefix
tests/clients``), or the openai-agents SDK pinned in pyproject.toml (one ``Runner.run`` with
its default model settings, through its Responses model or its chat-completions one). It
prints, per run: the steps the task finished, the upstream's refusals (each one an overflow
retry), what reached the client, the share of consecutive requests that kept the previous
forwarded prompt as their prefix, and the share of prompt tokens (the tools and instructions
included) in a prefix equal to the previous request's: what a provider's prompt cache serves;
beside it, that share's ceiling, were every request the previous one whole with only its new
items after it (a step's new tool output is new tokens whatever a cut does: at 16k, a 120-line
step is about a sixth of the prompt).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "tests" / "clients" / "node_modules" / ".bin"


@dataclass(frozen=True)
class Run:
    client: str  # claude, codex or openai-agents
    window: int
    steps: int
    model: str
    lines: int = 120  # of each step file: about 20 tokens a line
    api: str = ""  # openai-agents' model: "responses" or "chat"

    @property
    def label(self) -> str:
        api = {"responses": " (Responses)", "chat": " (chat completions)"}.get(self.api, "")
        return f"{self.client} {self.model}{api}, {self.steps} steps at {self.window // 1000}k"


RUNS = (
    Run("claude", 32_000, 300, "claude-opus-4-8"),
    Run("claude", 24_000, 100, "claude-opus-4-8"),
    Run("codex", 16_000, 100, "gpt-6.1-sol"),
    Run("codex", 16_000, 100, "gpt-5.1-codex"),
    Run("codex", 16_000, 100, "gpt-5.1-codex", lines=40),
    Run("codex", 32_000, 100, "gpt-5.1-codex"),
    Run("openai-agents", 16_000, 100, "gpt-4.1", api="responses"),
    Run("openai-agents", 32_000, 100, "gpt-4.1", api="responses"),
    Run("openai-agents", 16_000, 100, "gpt-4.1", api="chat"),
    Run("openai-agents", 32_000, 100, "gpt-4.1", api="chat"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the steps")
    parser.add_argument("--only", help="the runs whose label holds this text")
    parser.add_argument(
        "--breaks",
        action="store_true",
        help="print each request whose prefix broke before the previous request's end: where, "
        "and the first differing item of each",
    )
    args = parser.parse_args()
    clients = {run.client for run in RUNS if not args.only or args.only in run.label}
    if clients & {"claude", "codex"} and not all((BIN / c).exists() for c in ("claude", "codex")):
        print("the pinned CLIs are not installed: npm ci --prefix tests/clients")
        return 2
    sys.path.insert(0, str(ROOT))
    rows = []
    for run in RUNS:
        if args.only and args.only not in run.label:
            continue
        if args.quick:
            run = replace(run, steps=max(5, run.steps // 10))
        rows.append(measure(run, args.breaks))
        print(" | ".join(rows[-1]), flush=True)
    header = [
        "run",
        "finished",
        "refusals",
        "client errors",
        "prefix kept",
        "prompt tokens in the previous prefix",
        "ceiling: only the new items after the previous prompt",
        "seconds",
    ]
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


def measure(run: Run, breaks: bool = False) -> list[str]:
    from tests.clients.conftest import TASK, write_steps
    from tests.clients.scripted import Script, create_scripted

    work = Path(tempfile.mkdtemp(prefix="cw-agents-"))
    with ExitStack() as stack:
        script = Script(steps=run.steps, window=run.window)
        upstream = stack.enter_context(BackgroundServer(create_scripted(script)))
        apis = ["chat_completions", "responses", "messages"]
        config: dict[str, Any] = {
            "upstreams": {"scripted": {"base_url": f"{upstream.url}/v1", "apis": apis}},
            "default_upstream": "scripted",
            "data_dir": str(work / "data"),
            "models": {run.model: {"context_window": run.window}},
        }
        proxy = stack.enter_context(BackgroundServer(create_app(load_settings(None, **config))))
        (work / "task").mkdir()
        (work / "home").mkdir()
        write_steps(work / "task", run.steps, run.lines)
        started = time.monotonic()
        if run.client == "openai-agents":
            path = run.api
            output, failed = asyncio.run(run_agents(run, proxy.url, work / "task", TASK))
        else:
            argv, env, path = command(run, proxy.url, work / "home", TASK)
            done = subprocess.run(
                argv, cwd=work / "task", env=env, capture_output=True, text=True, timeout=3600,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            output, failed = done.stdout, done.returncode != 0
        seconds = time.monotonic() - started
    received = [r for r in script.received if r.path == path]
    taken = [r.body for r in received if r.status == 200]
    finished = f"Done after {run.steps} steps" in output
    # A prefix as the provider's cache sees it: Claude Code moves its cache_control marker to
    # the newest message on every request, which changes no cached token.
    items = [unmarked(prompt_items(b, path)) for b in taken]
    kept = sum(b[: len(a)] == a for a, b in itertools.pairwise(items))
    share = prefix_token_share(items)
    ceiling = append_ceiling(items)
    if breaks:
        for line in broken_prefixes(items):
            print(line, flush=True)
    return [
        run.label + ("" if run.lines == 120 else f", {run.lines}-line steps"),
        "yes" if finished else "no",
        str(len(received) - len(taken)),
        "1" if failed else "0",
        f"{kept}/{max(0, len(taken) - 1)}",
        f"{share:.0%}",
        f"{ceiling:.0%}",
        f"{seconds:.0f}",
    ]


def broken_prefixes(items: list[list[Any]]) -> list[str]:
    """For each request whose prompt does not start with the whole previous one: its number,
    its items and the index of the first that differs, with both versions of that item."""
    lines = []
    for n, (a, b) in enumerate(itertools.pairwise(items), 2):
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        if k == len(a):
            continue
        lines.append(f"request {n}: {len(a)} -> {len(b)} items, the prefix breaks at item {k}")
        lines.append(f"  was: {orjson.dumps(a[k]).decode()[:300]}")
        now = orjson.dumps(b[k]).decode()[:300] if k < len(b) else "(none)"
        lines.append(f"  now: {now}")
    return lines


def prompt_items(body: dict[str, Any], path: str) -> list[Any]:
    """A request's prompt in the order a provider's cache reads it: the tools, the
    instructions (Messages' ``system``, Responses' ``instructions``), then each message or
    input item."""
    if path == "responses":
        frame = [{"tools": body.get("tools")}, {"instructions": body.get("instructions")}]
        return [*frame, *body.get("input", [])]
    if path == "chat":
        return [{"tools": body.get("tools")}, *body.get("messages", [])]
    frame = [{"tools": body.get("tools")}, {"system": body.get("system")}]
    return [*frame, *body.get("messages", [])]


def prefix_token_share(items: list[list[Any]]) -> float:
    """Of the prompt tokens of every request after the first, the share in its longest run of
    leading items equal to the previous request's (what a provider's prompt cache serves;
    each item counted as its JSON in o200k tokens)."""
    from proxy.demo.own import encoding

    enc = encoding("o200k_base")
    cache: dict[bytes, int] = {}

    def tokens(item: Any) -> int:
        raw = orjson.dumps(item)
        if raw not in cache:
            cache[raw] = len(enc.encode_ordinary(raw.decode()))
        return cache[raw]

    shared = total = 0
    for a, b in itertools.pairwise(items):
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        costs = [tokens(item) for item in b]
        shared += sum(costs[:k])
        total += sum(costs)
    return shared / total if total else 0.0


def append_ceiling(items: list[list[Any]]) -> float:
    """The most ``prefix_token_share`` could be: every request the previous one whole with
    only its new trailing items after it (the items of a request that the previous one did
    not hold, from its end back to the first it did, are new whatever a cut does)."""
    from proxy.demo.own import encoding

    enc = encoding("o200k_base")
    fresh = total = 0
    for a, b in itertools.pairwise(items):
        seen = {orjson.dumps(item) for item in a}
        costs = [len(enc.encode_ordinary(orjson.dumps(item).decode())) for item in b]
        n = len(b)
        while n > 0 and orjson.dumps(b[n - 1]) not in seen:
            n -= 1
        fresh += sum(costs[n:])
        total += sum(costs)
    return 1 - fresh / total if total else 0.0


def unmarked(value: Any) -> Any:
    """``value`` without its ``cache_control`` markers."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


async def run_agents(run: Run, proxy: str, task_dir: Path, task: str) -> tuple[str, bool]:
    """One ``Runner.run`` of the task by an openai-agents agent with a ``read_file`` tool and
    default model settings, as tests/clients/test_openai_agents.py drives it: its final output,
    and whether it raised."""
    import openai
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)

    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the task's directory."""
        return (task_dir / Path(path).name).read_text()

    url = f"{proxy}/v1"
    async with openai.AsyncOpenAI(base_url=url, api_key="sk-bench", max_retries=0) as client:
        model = (
            OpenAIResponsesModel(model=run.model, openai_client=client)
            if run.api == "responses"
            else OpenAIChatCompletionsModel(model=run.model, openai_client=client)
        )
        coder = Agent(
            name="coder",
            instructions="You are a careful agent. Read what you are asked to read.",
            tools=[read_file],
            model=model,
        )
        try:
            result = await Runner.run(coder, task, max_turns=run.steps + 5)
        except Exception as error:  # a client error is a figure of the run
            return f"{type(error).__name__}: {error}", True
        return str(result.final_output), False


def command(run: Run, proxy: str, home: Path, task: str) -> tuple[list[str], dict[str, str], str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    if run.client == "claude":
        (home / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
        env |= {
            "ANTHROPIC_BASE_URL": proxy,
            "ANTHROPIC_API_KEY": "sk-ant-bench",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        return [str(BIN / "claude"), "-p", task, "--allowedTools", "Bash(cat:*)"], env, "messages"
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model_provider = "cw"\n[model_providers.cw]\nname = "cw"\n'
        f'base_url = "{proxy}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )
    env |= {"OPENAI_API_KEY": "sk-bench", "CODEX_HOME": str(codex_home)}
    argv = [str(BIN / "codex"), "exec", "--skip-git-repo-check"]
    argv += ["--dangerously-bypass-approvals-and-sandbox", "-m", run.model, task]
    return argv, env, "responses"


if __name__ == "__main__":
    raise SystemExit(main())
