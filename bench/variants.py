"""``python -m bench.variants caches|backstops [--quick]``: the proxy in several configurations
side by side, each in its own process, measured interleaved in one run against the same upstream and
the same pass-through floor (bench/passthrough.py), so the figures compare like with like.

``caches``: the proxy with every cross-request cache (``caches: on``, the default), with none
(``caches: off``), and with each one alone turned off (proxy/observe/memory.py ``CACHES``): what
each cache saves, on a 118k-token resend and on agent-sized conversations in each format.

``backstops``: every cache off but one, for each: what each saves alone, when the others miss
(a request whose items its replica did not see, a client that re-serializes its history).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml

from bench import agent_sized
from bench.__main__ import (
    FORMATS,
    HERE,
    free_port,
    pct,
    post_each,
    resend_body,
    run_load,
    table,
    wait_idle,
    wait_port,
)
from bench.client import Connection
from proxy.observe.memory import CACHES

# A proxy serving with only the named caches emptied (the rest as ``caches: on`` has them).
SERVE = (
    "import sys; import proxy.observe.memory as m; m.CACHES = tuple(sys.argv[1].split(','));"
    " from proxy.cli import main; sys.exit(main(sys.argv[2:]))"
)


def variants(kind: str) -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
    """(label, extra config keys, the caches emptied when only some are)."""
    rows: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("caches on", {}, ()),
        ("caches off", {"caches": False}, ()),
    ]
    if kind == "caches":
        return rows + [(f"without {name}", {"caches": False}, (name,)) for name in CACHES]
    # ``backstops``: every cache off but one: what each alone saves, when the others miss.
    others = {name: tuple(c for c in CACHES if c != name) for name in CACHES}
    return [*rows, *((f"only {name}", {"caches": False}, others[name]) for name in CACHES)]


def config(up_port: int, data_dir: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "upstreams": {
            "mock": {
                "base_url": f"http://127.0.0.1:{up_port}/v1",
                "apis": ["chat_completions", "responses", "messages"],
            }
        },
        "default_upstream": "mock",
        "models": {
            "bench-model": {"context_window": 128000, "tokenizer": "o200k_base"},
            "bench-claude": {"context_window": 200000, "tokenizer": "estimate"},
            agent_sized.MODEL: {"context_window": agent_sized.WINDOW, "tokenizer": "o200k_base"},
        },
        "data_dir": data_dir,
        **extra,
    }


@contextmanager
def started(kind: str) -> Iterator[tuple[int, int, dict[str, int]]]:
    """(upstream port, floor port, each variant's proxy port)."""
    up_port, floor_port = free_port(), free_port()
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    with ExitStack() as stack:
        procs: list[subprocess.Popen[bytes]] = []

        def spawn(*argv: str) -> subprocess.Popen[bytes]:
            proc = subprocess.Popen([sys.executable, *argv], cwd=HERE.parent, **quiet)
            procs.append(proc)
            return proc

        stack.callback(lambda: [(p.terminate(), p.wait(timeout=10)) for p in procs])
        up = spawn("-m", "bench.upstream", str(up_port))
        floor = spawn("-m", "bench.passthrough", str(floor_port), str(up_port))
        ports: dict[str, int] = {}
        for label, extra, emptied in variants(kind):
            data = stack.enter_context(tempfile.TemporaryDirectory())
            path = Path(data) / "bench.yaml"
            path.write_text(yaml.safe_dump(config(up_port, data, extra)))
            port = free_port()
            serve = ["serve", "--config", str(path), "--port", str(port)]
            if emptied:
                proxy = spawn("-c", SERVE, ",".join(emptied), *serve)
            else:
                proxy = spawn("-m", "proxy.cli", *serve)
            wait_port(port, proxy)
            wait_idle(proxy.pid)
            ports[label] = port
        wait_port(up_port, up)
        wait_port(floor_port, floor)
        yield up_port, floor_port, ports


async def resend_rows(up: int, floor: int, ports: dict[str, int], total: int) -> list[list[str]]:
    """p50 and p90 of each, interleaved, for chat's small request and a 118k-token resend."""
    rows = []
    cases = [("chat", FORMATS[0][1], FORMATS[0][2])]
    cases.append(("chat, 118k-token resend", "/v1/chat/completions", resend_body(118_000)))
    every = {"direct": up, "floor": floor, **ports}
    for fmt, path, body in cases:
        n = max(total // (4 if "118k" in fmt else 1), 40)
        seen: dict[str, list[float]] = {name: [] for name in every}
        for _ in range(4):  # interleaved so drift on a shared machine hits all alike
            for name, port in every.items():
                seen[name] += (await run_load(port, path, n // 4, 1, body))[0]
        for q, label in ((0.5, "p50"), (0.9, "p90")):
            rows.append([f"latency {label}, {fmt}", *_over_floor(seen, q)])
    n = max(total, 64)
    rate = {
        name: n / (await run_load(port, FORMATS[0][1], n, 16))[1] for name, port in every.items()
    }
    row = [
        "throughput, concurrency 16",
        f"{rate['direct']:.0f} req/s",
        f"{rate['floor']:.0f} req/s",
    ]
    rows.append(row + [f"{rate[name] / rate['floor']:.2f}x of floor" for name in ports])
    return rows


async def agent_rows(up: int, floor: int, ports: dict[str, int], passes: int) -> list[list[str]]:
    """Agent-sized conversations (bench/agent_sized.py), request by request interleaved."""
    rows = []
    conversations = agent_sized.passes(passes)
    every = {"direct": up, "floor": floor, **ports}
    for fmt, path, write in agent_sized.FORMATS:
        conns = {name: await Connection.open("127.0.0.1", port) for name, port in every.items()}
        seen: dict[str, list[float]] = {name: [] for name in every}
        for conversation in conversations:
            for messages in conversation:
                await post_each(conns, path, write(messages), seen, fmt)
        for conn in conns.values():
            await conn.close()
        for q, label in ((0.5, "p50"), (0.9, "p90")):
            rows.append([f"latency {label}, {fmt}, agent-sized", *_over_floor(seen, q)])
    return rows


def _over_floor(seen: dict[str, list[float]], q: float) -> list[str]:
    d, f = pct(seen["direct"], q) * 1000, pct(seen["floor"], q) * 1000
    cells = [f"{d:.2f} ms", f"{f:.2f} ms"]
    for name in list(seen)[2:]:
        p = pct(seen[name], q) * 1000
        cells.append(f"{p:.2f} ms ({p - f:+.2f})")
    return cells


async def measure(kind: str, quick: bool) -> str:
    with started(kind) as (up, floor, ports):
        for port in ports.values():  # the first request loads the tokenizers
            conn = await Connection.open("127.0.0.1", port)
            await conn.post(FORMATS[0][1], FORMATS[0][2])
            await conn.close()
        total = 200 if quick else 1000
        rows = await resend_rows(up, floor, ports, total)
        rows += await agent_rows(up, floor, ports, 1 if quick else 4)
    header = ["measure", "direct", "floor", *(f"{name} (over floor)" for name in ports)]
    return table(header, rows)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.variants")
    parser.add_argument("kind", choices=["caches", "backstops"])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    print(asyncio.run(measure(args.kind, args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
