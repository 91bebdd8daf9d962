"""A large resend measured as a user's client sees it: ``python -m bench.resend [--rounds N]``.

An agent's chat body of 140 messages (about 814 KB, 118k o200k tokens) that fits, sent again
and again unchanged, as an agent resends its history each turn. Three paths to the same mock
upstream (bench/upstream.py), each a uvicorn server in its own process on loopback:

- direct: the upstream itself;
- bare: starlette + one pooled ``httpx.AsyncClient`` relaying the bytes (bench/passthrough.py);
- proxy: ``contextwarden serve`` on the embedded default's upstreams (``OPENAI_BASE_URL``) with
  a model of a 200k window and one of a 1M window.

The client is one ``httpx.Client`` per path with keep-alive, as an SDK is; each round sends
the body to every path in turn (interleaved, so drift on a shared machine hits all alike), with
and without ``Authorization: Bearer``. Each proxy answer must say it counted exactly and did
nothing (``x-contextwarden-count: exact``, ``x-contextwarden-actions: none``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from bench.families import _words

MODELS = {"resend-200k": 200_000, "resend-1m": 1_000_000}
# Codex CLI's tools: an agent's history names them in every call.
TOOLS = ("shell", "apply_patch", "update_plan", "view_image")
PATH = "/v1/chat/completions"
PROXIES = ("proxy", "baseline")
AUTH = {"authorization": "Bearer sk-bench-resend"}


def _tool_output(rng: random.Random, lines: int) -> str:
    """A file's lines as a tool reads them: indented code, quoted keys, a comment each, and
    a test run's verdict (non-ASCII, as tools print it)."""
    names = ("request", "window", "token", "budget", "proxy", "relay", "cache", "prefix")
    out = [f"✓ {rng.randint(1, 400)} passed — {_words(rng, 3)}"]
    for _ in range(lines):
        a, b, c = (rng.choice(names) for _ in range(3))
        indent = " " * (8 * rng.randint(5, 12))
        out.append(f'{indent}{a}_{b} = self.{c}["{a}-{rng.randint(0, 9999)}"]  # {_words(rng, 2)}')
    return "\n".join(out)


def agent_messages(pairs: int = 68, lines: int = 95, seed: int = 57) -> list[dict[str, Any]]:
    """140 messages of a coding agent's session: a system prompt, the task, ``pairs`` tool
    calls with their results, a last answer and the user's next turn."""
    rng = random.Random(seed)
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools. " + _words(rng, 300)},
        {"role": "user", "content": "Fix the failing deploy: " + _words(rng, 120, "database")},
    ]
    for step in range(pairs):
        call = {
            "id": f"call_{step:04d}",
            "type": "function",
            "function": {
                "name": rng.choice(TOOLS),
                "arguments": orjson.dumps({"path": f"src/mod{step}.py"}).decode(),
            },
        }
        msgs.append({"role": "assistant", "content": _words(rng, 25), "tool_calls": [call]})
        msgs.append(
            {"role": "tool", "tool_call_id": call["id"], "content": _tool_output(rng, lines)}
        )
    msgs.append({"role": "assistant", "content": "The deploy passes its checks now."})
    msgs.append({"role": "user", "content": "What next?"})
    return msgs


def body(model: str, messages: list[dict[str, Any]] | None = None, spaced: bool = False) -> bytes:
    """The request, written compact as httpx, the SDKs and JSON.stringify write it; with
    ``spaced``, as Python's ``json.dumps`` does by default (``requests``' and aiohttp's
    ``json=``: a space after each separator, non-ASCII escaped)."""
    payload = {"model": model, "messages": messages or agent_messages(), "max_tokens": 256}
    return json.dumps(payload).encode() if spaced else orjson.dumps(payload)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def servers(data_dir: str, baseline: str | None = None) -> Iterator[dict[str, tuple[int, int]]]:
    """(port, pid) of the upstream, the bare pass-through and the proxy, each its own process;
    and with ``baseline`` (another checkout's directory) that checkout's proxy beside it."""
    from bench.__main__ import free_port, wait_idle, wait_port

    ports = {"direct": free_port(), "bare": free_port(), "proxy": free_port()}
    if baseline:
        ports["baseline"] = free_port()
    config = {
        "models": {
            name: {"context_window": w, "tokenizer": "o200k_base"} for name, w in MODELS.items()
        },
        "data_dir": data_dir,
    }
    path = Path(data_dir) / "resend.yaml"
    path.write_text(yaml.safe_dump(config))
    here = str(Path(__file__).resolve().parent.parent)
    env = {
        **os.environ,
        "PYTHONPATH": here,
        "OPENAI_BASE_URL": f"http://127.0.0.1:{ports['direct']}/v1",
    }
    env.pop("OPENAI_API_KEY", None)
    quiet: dict[str, Any] = {
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "env": env,
        "cwd": here,
    }
    py = sys.executable
    serve = [py, "-m", "proxy.cli", "serve", "--config"]
    procs = {
        "direct": subprocess.Popen([py, "-m", "bench.upstream", str(ports["direct"])], **quiet),
        "bare": subprocess.Popen(
            [py, "-m", "bench.passthrough", str(ports["bare"]), str(ports["direct"])], **quiet
        ),
        "proxy": subprocess.Popen([*serve, str(path), "--port", str(ports["proxy"])], **quiet),
    }
    if baseline:
        other = Path(data_dir) / "baseline"
        other.mkdir()
        config["data_dir"] = str(other)
        (other / "resend.yaml").write_text(yaml.safe_dump(config))
        tree = str(Path(baseline).resolve())  # ``-m`` puts the working directory first
        quiet = {**quiet, "env": {**env, "PYTHONPATH": tree}, "cwd": tree}
        procs["baseline"] = subprocess.Popen(
            [*serve, str(other / "resend.yaml"), "--port", str(ports["baseline"])], **quiet
        )
    try:
        for name, proc in procs.items():
            wait_port(ports[name], proc)
        for name in ("proxy", "baseline"):
            if name in procs:
                wait_idle(procs[name].pid)
        yield {name: (ports[name], proc.pid) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=10)


def checked(answer: httpx.Response) -> None:
    """A proxy answer that counted exactly and left the body alone."""
    got = (
        answer.headers.get("x-contextwarden-count"),
        answer.headers.get("x-contextwarden-actions"),
    )
    if answer.status_code != 200 or got != ("exact", "none"):
        raise RuntimeError(f"proxy answered {answer.status_code}, count/actions {got}")


Seen = dict[tuple[str, str, bool], list[float]]


def measure(
    servers: dict[str, tuple[int, int]], rounds: int, per_round: int, spaced: bool = False
) -> tuple[Seen, dict[str, float]]:
    """Seconds per request, by (path, model, with Authorization); and each server's CPU
    seconds per request (its process's user + system time over the rounds: a figure a busy
    machine's waits do not blur)."""
    from bench.__main__ import cpu_seconds

    messages = agent_messages()
    bodies = {model: body(model, messages, spaced) for model in MODELS}
    clients = {
        name: httpx.Client(base_url=f"http://127.0.0.1:{port}")
        for name, (port, _) in servers.items()
    }
    seen: Seen = {}
    try:
        for data in bodies.values():  # warm: tokenizers, pools, the proxy's caches
            for name, client in clients.items():
                for _ in range(3):
                    answer = client.post(PATH, content=data, headers=AUTH)
                    if name in PROXIES:
                        checked(answer)
        cpu = {name: cpu_seconds(pid) for name, (_, pid) in servers.items()}
        for _ in range(rounds):
            for model, data in bodies.items():
                for auth in (True, False):
                    headers = {"content-type": "application/json", **(AUTH if auth else {})}
                    for _ in range(per_round):
                        for name, client in clients.items():
                            t = time.perf_counter()
                            answer = client.post(PATH, content=data, headers=headers)
                            elapsed = time.perf_counter() - t
                            if name in PROXIES:
                                checked(answer)
                            elif answer.status_code != 200:
                                raise RuntimeError(f"{name} answered {answer.status_code}")
                            seen.setdefault((name, model, auth), []).append(elapsed)
        n = rounds * per_round * len(bodies) * 2
        used = {name: (cpu_seconds(pid) - cpu[name]) / n for name, (_, pid) in servers.items()}
    finally:
        for client in clients.values():
            client.close()
    return seen, used


def rows(seen: Seen, used: dict[str, float]) -> list[list[str]]:
    """p50 and p90 of each path's time and of the differences between the paths' times in
    each turn (a turn's requests are sent back to back: drift hits them alike); a baseline
    proxy's rows (``--baseline``) after the proxy's."""
    out = []
    for proxy in (name for name in PROXIES if name in used):
        tag = "" if proxy == "proxy" else f" ({proxy})"
        for model in MODELS:
            for auth in (True, False):
                d, b, p = (seen[(path, model, auth)] for path in ("direct", "bare", proxy))
                diffs = [
                    [y - x for x, y in zip(d, p, strict=True)],
                    [y - x for x, y in zip(d, b, strict=True)],
                    [y - x for x, y in zip(b, p, strict=True)],
                ]
                for q, name in ((0.5, "p50"), (0.9, "p90")):
                    label = f"{name}, {model}, {'with' if auth else 'no'} Authorization{tag}"
                    times = [f"{pct(v, q) * 1000:.2f} ms" for v in (d, b, p)]
                    added = [f"{pct(v, q) * 1000:+.2f} ms" for v in diffs]
                    out.append([label, *times, *added])
    # The upstream answers every other path's requests too.
    up = used["direct"] / (len(used) - 1) * 1000
    bare = used["bare"] * 1000
    for proxy in (name for name in PROXIES if name in used):
        tag = "" if proxy == "proxy" else f" ({proxy})"
        mine = used[proxy] * 1000
        out.append(
            [f"server CPU a request (its process){tag}", f"{up:.2f} ms", f"{bare:.2f} ms",
             f"{mine:.2f} ms", "", "", f"{mine - bare:+.2f} ms"]
        )  # fmt: skip
    return out


HEADER = ["measure", "direct", "bare", "proxy", "proxy - direct", "bare - direct", "proxy - bare"]


def section(rounds: int, per_round: int, baseline: str | None = None, spaced: bool = False) -> str:
    """The measurement's title and table (Markdown)."""
    from bench.__main__ import table

    messages = agent_messages()
    size = len(body("resend-200k", messages, spaced))
    with tempfile.TemporaryDirectory() as tmp, servers(tmp, baseline) as running:
        seen, used = measure(running, rounds, per_round, spaced)
    n = len(seen[("proxy", "resend-200k", True)])
    return (
        f"An agent's unchanged chat body ({len(messages)} messages, {size / 1000:.0f} KB"
        f"{', as json.dumps writes it' if spaced else ''}), "
        f"resent {n} times a case through httpx with keep-alive: direct, through a bare "
        "starlette + pooled httpx pass-through, and through the proxy (count exact, actions "
        "none); the differences are of each round's requests, taken in turn\n\n"
        + table(HEADER, rows(seen, used))
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.resend")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--per-round", type=int, default=5, help="requests a path a round")
    parser.add_argument(
        "--baseline", help="another checkout's directory: its proxy measured in the same turns"
    )
    parser.add_argument(
        "--spaced", action="store_true", help="the body as Python's json.dumps writes it"
    )
    args = parser.parse_args()
    print(section(args.rounds, args.per_round, args.baseline, args.spaced))
    return 0


if __name__ == "__main__":
    sys.exit(main())
