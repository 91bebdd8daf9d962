"""A soak: 10,000 distinct chat conversations of three requests each through one proxy process
(a 2,048-token window, summaries on), and the process's memory as they go.

Each conversation is new to the proxy: its first request is over the budget on first sight
(truncated), its second outgrows that cut (a summary is made), its third replays the second's
cut (the summary reused, the prefix kept). The proxy runs as its own process at its defaults,
memory budget included (``python -m bench.soak [--quick] [--conversations N]`` runs this
section alone); its resident memory is read from /proc 20 times over the run. The baseline
is in the same run: the first tenth of the conversations, while the caches fill, against the
last tenth, when they are full and let the least recently used go: the prefix kept and the
summaries made and reused per conversation are the same.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from bench.client import Connection

WINDOW = 2048
MODEL = "soak-model"
CONCURRENCY = 16
SAMPLES = 20  # RSS readings over the run (every 500 conversations of 10,000)
_WORDS = (
    "the of and to in that it is was for on are as with they be at one have this from or had "
    "by word but what some we can out other were all there when up use your how said an each "
    "deploy migration schema index replica backup query shard cache token window"
)
WORDS = tuple(_WORDS.split())
HERE = Path(__file__).resolve().parent


def conversation(k: int) -> list[bytes]:
    """Conversation ``k``'s three request bodies: about 2,600 tokens, then 700 more each."""
    rng = random.Random(k)

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": f"Conversation {k}: {words(120)}"},
    ]
    bodies = []
    for turns in (6, 2, 2):
        for _ in range(turns):
            messages.append({"role": "assistant", "content": words(rng.randint(120, 200))})
            messages.append({"role": "user", "content": words(rng.randint(60, 140))})
        bodies.append(orjson.dumps({"model": MODEL, "messages": messages, "max_tokens": 64}))
    return bodies


@dataclass
class Tally:
    requests: int = 0
    answered: int = 0
    created: int = 0
    reused: int = 0
    trimmed_pairs: int = 0  # a trimmed request after a trimmed one, in one conversation
    kept: int = 0  # of those, the proxy said the prefix was kept

    def add(self, other: Tally) -> None:
        for name in ("requests", "answered", "created", "reused", "trimmed_pairs", "kept"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Soak:
    conversations: list[Tally] = field(default_factory=list)  # in the order they finished
    rss: list[tuple[int, int]] = field(default_factory=list)  # (conversations done, KiB)
    store_faults: int = 0  # from the proxy's log: a store call past its timeout, say
    summaries_failed: int = 0

    def total(self, part: slice = slice(None)) -> Tally:
        total = Tally()
        for t in self.conversations[part]:
            total.add(t)
        return total


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def drive(port: int, pid: int, total: int, soak: Soak) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for k in range(total):
        queue.put_nowait(k)
    every = max(1, total // SAMPLES)

    async def worker() -> None:
        conn = await Connection.open("127.0.0.1", port)
        while not queue.empty():
            soak.conversations.append(await converse(conn, queue.get_nowait()))
            if len(soak.conversations) % every == 0:
                soak.rss.append((len(soak.conversations), rss_kib(pid)))
        await conn.close()

    soak.rss.append((0, rss_kib(pid)))
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def converse(conn: Connection, k: int) -> Tally:
    tally, trimmed_before = Tally(), False
    for body in conversation(k):
        status, _ = await conn.post("/v1/chat/completions", body)
        headers = conn.last_headers
        tally.requests += 1
        tally.answered += status == 200
        event = headers.get("x-contextwarden-checkpoint", "")
        tally.created += event.startswith("created")
        tally.reused += event.startswith("reused")
        trimmed = headers.get("x-contextwarden-actions", "none") != "none"
        if trimmed and trimmed_before:
            tally.trimmed_pairs += 1
            tally.kept += headers.get("x-contextwarden-prefix") == "kept"
        trimmed_before = trimmed
    return tally


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the proxy exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the proxy was not ready")


def soak(total: int) -> tuple[Soak, dict[str, Any]]:
    """The soak through a fresh proxy process at its defaults; what it recorded, and the
    proxy's memory figures from ``/admin/stats`` at the end."""
    up_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "CW_SOAK_ADMIN": "soak-admin"}
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    with tempfile.TemporaryDirectory() as data:
        config: dict[str, Any] = {
            "upstreams": {"mock": {"base_url": f"http://127.0.0.1:{up_port}/v1"}},
            "models": {MODEL: {"context_window": WINDOW, "tokenizer": "o200k_base"}},
            "data_dir": data,
            "admin_key_env": "CW_SOAK_ADMIN",
        }
        path = Path(data) / "soak.yaml"
        path.write_text(yaml.safe_dump(config))
        upstream = subprocess.Popen(
            [sys.executable, "-m", "bench.upstream", str(up_port)], env=env, **quiet
        )
        argv = [sys.executable, "-m", "proxy.cli", "serve", "--config", str(path)]
        log = (Path(data) / "proxy.log").open("wb")
        proxy = subprocess.Popen(
            [*argv, "--port", str(proxy_port)], env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            wait_ready(proxy_port, proxy)
            run = Soak()
            asyncio.run(drive(proxy_port, proxy.pid, total, run))
            stats = httpx.get(
                f"http://127.0.0.1:{proxy_port}/admin/stats",
                headers={"authorization": "Bearer soak-admin"},
            ).json()
        finally:
            for p in (proxy, upstream):
                p.terminate()
                p.wait(timeout=30)
            log.close()
        text = (Path(data) / "proxy.log").read_text(errors="replace")
        run.store_faults = text.count("checkpoint store unavailable")
        run.summaries_failed = text.count("summarization failed")
    return run, stats.get("memory", {})


def soak_rows(quick: bool, total: int | None = None) -> tuple[list[str], list[list[str]]]:
    total = total or (100 if quick else 10_000)
    run, memory = soak(total)
    tenth = max(1, total // 10)
    rows = []
    for name, part in (
        (f"first {tenth} conversations (the caches filling)", slice(None, tenth)),
        (f"last {tenth} (the caches full, letting go)", slice(-tenth, None)),
        (f"all {total}", slice(None)),
    ):
        t = run.total(part)
        n = max(1, part.indices(total)[1] - part.indices(total)[0])
        rows.append(
            [
                name,
                f"{t.answered}/{t.requests}",
                f"{t.kept / max(1, t.trimmed_pairs):.1%} ({t.kept}/{t.trimmed_pairs})",
                f"{t.created / n:.3f} / {t.reused / n:.3f}",
            ]
        )
    rss = [kib / 1024 for _, kib in run.rss]
    budget = memory.get("budget_mb", 0)
    rows.append(
        [
            f"proxy RSS: {rss[0]:.0f} MiB at start, {max(rss):.0f} MiB at most, "
            f"{rss[-1]:.0f} MiB at the end",
            f"budget {budget} MiB",
            f"footprint {memory.get('footprint_mb', 0):.0f} MiB, caches "
            f"{memory.get('caches_mb', 0):.0f} MiB",
            f"held at the end {memory.get('held_mb', 0):.0f} MiB",
        ]
    )
    rows.append(
        [
            "faults in the proxy's log (each costs its request the summary)",
            "",
            f"store: {run.store_faults}",
            f"summarizer: {run.summaries_failed}",
        ]
    )
    header = [
        f"{total} conversations x 3 requests ({WINDOW}-token window, defaults)",
        "answered",
        "prefix kept (trimmed pairs)",
        "summaries created / reused per conversation",
    ]
    return header, rows


def main() -> int:
    from bench.__main__ import table

    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--conversations", type=int)
    args = parser.parse_args()
    print(table(*soak_rows(args.quick, args.conversations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
