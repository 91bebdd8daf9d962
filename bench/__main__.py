"""``python -m bench [--quick] [--no-write]``: every figure against a baseline from the same run.

Starts the mock upstream and the proxy as separate processes on loopback, then measures:
added latency and throughput (proxy vs direct), decision time as conversations grow (cold and
warm), trimming quality against ``litellm.utils.trim_messages``, the proxy's memory while it
relays a large stream, summarizer calls per conversation growth, and a soak of 10,000
conversations against the memory budget (bench/soak.py). Prints a table and writes it to
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from bench import agent_sized
from bench.client import Connection, HttpxConnection
from bench.decision import decision_rows
from bench.economy import economy_rows
from bench.families import family_rows
from bench.fidelity import Summarizer, fidelity_rows
from bench.formats import format_rows
from bench.hostile import HEADER as HOSTILE_HEADER
from bench.hostile import hostile_rows
from bench.ledger_reads import ledger_rows
from bench.load import load_rows
from bench.outputs import output_rows
from bench.quality import quality_rows
from bench.recall import recall_rows
from bench.resend import MODELS as RESEND_MODELS
from bench.resend import body as agent_resend
from bench.resend import section as resend_section
from bench.rules import rules_rows
from bench.shadow import HEADER as SHADOW_HEADER
from bench.shadow import shadow_rows
from bench.soak import soak_rows
from bench.summaries import summary_rows

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Sizes:
    sequential: int
    concurrent: int
    conversation_tokens: tuple[int, ...]
    stream_mb: int
    quality_cases: int
    load_clients: int
    load_seconds: float
    hostile_seconds: float
    agent_passes: int


QUICK = Sizes(60, 200, (1000, 8000), 2, 4, 20, 2, 3, 1)
FULL = Sizes(2000, 6000, (1000, 8000, 32000, 128000, 512000), 50, 40, 200, 30, 30, 8)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, timeout: float = 60) -> None:
    """Wait until the proxy has finished starting (it loads litellm in the background when a
    policy summarizes), so that start-up work does not land in the first measurements."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last < 0.02:
            return
        last = now


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


@contextmanager
def processes(data_dir: str) -> Iterator[tuple[int, int, int, int, int]]:
    """(upstream port, slow upstream port, proxy port, proxy pid, pass-through floor port)."""
    up_port, slow_port, proxy_port, floor_port = free_port(), free_port(), free_port(), free_port()
    config = {
        "upstreams": {
            "mock": {
                "base_url": f"http://127.0.0.1:{up_port}/v1",
                "apis": ["chat_completions", "responses", "messages"],
            },
            "llm": {"base_url": f"http://127.0.0.1:{slow_port}/v1"},
        },
        "default_upstream": "mock",
        "models": {
            "bench-model": {"context_window": 128000, "tokenizer": "o200k_base"},
            "bench-llm": {"upstream": "llm", "context_window": 128000, "tokenizer": "o200k_base"},
            "bench-claude": {"context_window": 200000, "tokenizer": "estimate"},
            agent_sized.MODEL: {"context_window": agent_sized.WINDOW, "tokenizer": "o200k_base"},
            **{
                m: {"context_window": w, "tokenizer": "o200k_base"}
                for m, w in RESEND_MODELS.items()
            },
        },
        "data_dir": data_dir,
        # bench/hostile.py: the senders of maximum-size bodies; bench/shadow.py: shadow mode's
        "teams": {"hostile": {}, "shadow": {"mode": "shadow"}},
    }
    path = Path(data_dir) / "bench.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    upstream = subprocess.Popen([sys.executable, "-m", "bench.upstream", str(up_port)], **quiet)  # type: ignore[call-overload]
    slow = subprocess.Popen(
        [sys.executable, "-m", "bench.upstream", str(slow_port), str(LLM_DELAY_MS)], **quiet
    )  # type: ignore[call-overload]
    floor = subprocess.Popen(  # type: ignore[call-overload]
        [sys.executable, "-m", "bench.passthrough", str(floor_port), str(up_port)], **quiet
    )
    proxy = subprocess.Popen(  # type: ignore[call-overload]
        [
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--config",
            str(path),
            "--port",
            str(proxy_port),
        ],
        **quiet,
    )
    try:
        wait_port(up_port, upstream)
        wait_port(slow_port, slow)
        wait_port(proxy_port, proxy)
        wait_port(floor_port, floor)
        wait_idle(proxy.pid)
        yield up_port, slow_port, proxy_port, proxy.pid, floor_port
    finally:
        for p in (proxy, floor, upstream, slow):
            p.terminate()
            p.wait(timeout=10)


LLM_DELAY_MS = 50
REQUEST = orjson.dumps(
    {
        "model": "bench-model",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is a context window? " * 8},
            {"role": "assistant", "content": "The number of tokens a model can attend to. " * 6},
            {"role": "user", "content": "And how does a proxy keep requests inside it?"},
        ],
        "max_tokens": 256,
    }
)


LLM_REQUEST = REQUEST.replace(b'"bench-model"', b'"bench-llm"')
# The same conversation in the two agent formats.
RESPONSES_REQUEST = orjson.dumps(
    {
        "model": "bench-model",
        "instructions": "You are a helpful assistant.",
        "input": [
            {"role": "user", "content": "What is a context window? " * 8},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e" * 400},
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "The number of tokens a model can attend to. " * 6,
                    }
                ],
            },
            {"role": "user", "content": "And how does a proxy keep requests inside it?"},
        ],
        "max_output_tokens": 256,
    }
)
MESSAGES_REQUEST = orjson.dumps(
    {
        "model": "bench-claude",
        "max_tokens": 256,
        "system": [{"type": "text", "text": "You are a helpful assistant."}],
        "messages": [
            {"role": "user", "content": "What is a context window? " * 8},
            {"role": "assistant", "content": "The number of tokens a model can attend to. " * 6},
            {"role": "user", "content": "And how does a proxy keep requests inside it?"},
        ],
    }
)
FORMATS = (
    ("chat", "/v1/chat/completions", REQUEST),
    ("responses", "/v1/responses", RESPONSES_REQUEST),
    ("anthropic", "/v1/messages", MESSAGES_REQUEST),
)


async def run_load(
    port: int,
    path: str,
    total: int,
    concurrency: int,
    body: bytes = REQUEST,
    client: type[Connection | HttpxConnection] = Connection,
) -> tuple[list[float], float]:
    """Latencies (seconds) and elapsed wall time for ``total`` requests over ``concurrency``
    keep-alive connections of ``client``."""
    conns = [await client.open("127.0.0.1", port) for _ in range(concurrency)]
    for c in conns:  # warm each connection (and the proxy's upstream pool)
        await c.post(path, body)
    latencies: list[float] = []
    remaining = total

    async def worker(conn: Connection | HttpxConnection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            t = time.perf_counter()
            status, _ = await conn.post(path, body)
            latencies.append(time.perf_counter() - t)
            if status != 200:
                raise RuntimeError(f"status {status}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - started
    for c in conns:
        await c.close()
    return latencies, elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency_rows(up: int, proxy: int, sizes: Sizes) -> list[list[str]]:
    rows = []
    for concurrency, total in ((1, sizes.sequential), (16, sizes.concurrent)):
        for fmt, path, body in FORMATS:
            # The agent formats: a quarter of chat's samples each.
            total_fmt = total if fmt == "chat" else max(total // 4, 40)
            direct: list[float] = []
            via: list[float] = []
            for _ in range(4):  # interleave so drift on a shared machine hits both alike
                direct += (await run_load(up, path, total_fmt // 4, concurrency, body))[0]
                via += (await run_load(proxy, path, total_fmt // 4, concurrency, body))[0]
            for q, name in ((0.5, "p50"), (0.95, "p95")):
                d, p = pct(direct, q) * 1000, pct(via, q) * 1000
                label = f"latency {name}, concurrency {concurrency}"
                rows.append(
                    [
                        label if fmt == "chat" else f"{label}, {fmt}",
                        f"{d:.2f} ms",
                        f"{p:.2f} ms",
                        f"+{p - d:.2f} ms",
                    ]
                )
    return rows


def resend_body(tokens: int) -> bytes:
    """A chat conversation of about ``tokens`` o200k tokens that fits bench-model's 128k
    window: an agent session's resend, which the proxy must count and forward whole."""
    turn = "The deploy failed after the migration because the health check timed out. " * 20
    messages = [{"role": "system", "content": "You are a coding agent."}]
    for k in range(max(1, tokens // 600)):
        messages.append({"role": "user" if k % 2 == 0 else "assistant", "content": f"{k} {turn}"})
    messages.append({"role": "user", "content": "What next?"})
    return orjson.dumps({"model": "bench-model", "messages": messages, "max_tokens": 256})


async def floor_rows(up: int, floor: int, proxy: int, sizes: Sizes) -> list[list[str]]:
    """p50 and p90 of direct, floor and proxy, interleaved, for each format's small request
    and an agent's 118k-token chat resend that fits a 200k window (bench/resend.py), sent as
    a user's client sends them (httpx, keep-alive, ``Authorization``)."""
    cases = [(fmt, path, body) for fmt, path, body in FORMATS]
    cases.append(("chat, 118k-token resend", "/v1/chat/completions", agent_resend("resend-200k")))
    rows = []
    for fmt, path, body in cases:
        total = max(sizes.sequential // (8 if "118k" in fmt else 2), 40)
        seen: dict[int, list[float]] = {up: [], floor: [], proxy: []}
        for _ in range(4):  # interleave so drift on a shared machine hits all three alike
            for port in seen:
                seen[port] += (await run_load(port, path, total // 4, 1, body, HttpxConnection))[0]
        for q, name in ((0.5, "p50"), (0.9, "p90")):
            d, f, p = (pct(seen[port], q) * 1000 for port in (up, floor, proxy))
            rows.append(
                [
                    f"latency {name}, {fmt}",
                    f"{d:.2f} ms",
                    f"{f:.2f} ms",
                    f"{p:.2f} ms",
                    f"+{f - d:.2f} ms",
                    f"+{p - d:.2f} ms",
                    f"+{p - f:.2f} ms",
                ]
            )
    total = max(sizes.concurrent // 2, 64)
    elapsed = {}
    for port in (up, floor, proxy):
        elapsed[port] = (await run_load(port, "/v1/chat/completions", total, 16))[1]
    d, f, p = (total / elapsed[port] for port in (up, floor, proxy))
    rows.append(
        [
            "throughput, instant upstream, concurrency 16",
            f"{d:.0f} req/s",
            f"{f:.0f} req/s",
            f"{p:.0f} req/s",
            f"{f / d:.2f}x of direct",
            f"{p / d:.2f}x of direct",
            f"{p / f:.2f}x of floor",
        ]
    )
    return rows


async def post_each(
    conns: Mapping[Any, Connection | HttpxConnection],
    path: str,
    body: bytes,
    seen: dict[Any, list[float]],
    fmt: str,
) -> None:
    """``body`` to each connection in turn, each answer's time added to its ``seen``."""
    for key, conn in conns.items():
        t = time.perf_counter()
        status, _ = await conn.post(path, body)
        seen[key].append(time.perf_counter() - t)
        if status != 200:
            raise RuntimeError(f"{fmt}: status {status} from {key}")


async def agent_rows(up: int, floor: int, proxy: int, sizes: Sizes) -> list[list[str]]:
    """p50 and p90 of direct, floor and proxy on agent-sized requests (bench/agent_sized.py:
    5-10k tokens, an 8k window), request by request interleaved, in each format; how many the
    proxy trimmed, and the p50 of fitting and trimmed requests apart."""
    conversations = agent_sized.passes(sizes.agent_passes)
    rows = []
    for fmt, path, write in agent_sized.FORMATS:
        conns = {port: await HttpxConnection.open("127.0.0.1", port) for port in (up, floor, proxy)}
        seen: dict[int, list[float]] = {port: [] for port in conns}
        trimmed: list[bool] = []
        for conversation in conversations:
            for messages in conversation:
                await post_each(conns, path, write(messages), seen, fmt)
                actions = conns[proxy].last_headers.get("x-contextwarden-actions", "none")
                trimmed.append(actions != "none")
        for conn in conns.values():
            await conn.close()
        label = f"{fmt}, agent-sized ({sum(trimmed)}/{len(trimmed)} trimmed)"
        # The formats count the same conversation differently (Responses and Messages also
        # price the ids and blocks chat does not have), so they trim different requests:
        # fitting and trimmed ones apart compare like with like.
        fitting = [not t for t in trimmed]
        for q, name, which, kind in (
            (0.5, "p50", None, label),
            (0.9, "p90", None, label),
            (0.5, "p50", fitting, f"{fmt}, agent-sized, fitting only"),
            (0.5, "p50", trimmed, f"{fmt}, agent-sized, trimmed only"),
        ):
            if which is not None and not any(which):
                continue
            d, f, p = (
                pct(
                    [
                        x
                        for x, keep in zip(seen[port], which or trimmed, strict=True)
                        if which is None or keep
                    ],
                    q,
                )
                * 1000
                for port in (up, floor, proxy)
            )
            row = [f"{d:.2f} ms", f"{f:.2f} ms", f"{p:.2f} ms"]
            row += [f"+{f - d:.2f} ms", f"+{p - d:.2f} ms", f"+{p - f:.2f} ms"]
            rows.append([f"latency {name}, {kind}", *row])
    return rows


async def throughput_rows(up: int, slow: int, proxy: int, sizes: Sizes) -> list[list[str]]:
    rows = []
    for label, port, body, scale in (
        ("instant upstream", up, REQUEST, 1),
        (f"{LLM_DELAY_MS} ms upstream", slow, LLM_REQUEST, 8),
    ):
        for concurrency in (1, 16, 64):
            total = max(sizes.concurrent // (2 * scale), concurrency * 4)
            _, t_direct = await run_load(port, "/v1/chat/completions", total, concurrency, body)
            _, t_proxy = await run_load(proxy, "/v1/chat/completions", total, concurrency, body)
            d, p = total / t_direct, total / t_proxy
            rows.append(
                [
                    f"throughput, {label}, concurrency {concurrency}",
                    f"{d:.0f} req/s",
                    f"{p:.0f} req/s",
                    f"{p / d:.2f}x of direct",
                ]
            )
    return rows


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def slow_client_rows(proxy: int, pid: int, megabytes: int) -> list[list[str]]:
    """A client that reads a stream slowly (16 KiB every 10 ms): with backpressure the proxy
    holds only what socket buffers hold, not the upstream's whole output."""
    body = orjson.dumps(
        {
            "model": "bench-model",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_mb": megabytes,
        }
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    before = rss_kib(pid)
    peak, total = before, 0
    started = time.perf_counter()
    while True:
        chunk = await reader.read(16384)
        if not chunk:
            break
        total += len(chunk)
        if chunk.endswith(b"0\r\n\r\n"):
            break
        peak = max(peak, rss_kib(pid))
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    writer.close()
    return [
        [
            f"slow client, {total / 1e6:.0f} MB over {elapsed:.0f} s: proxy RSS",
            f"{before / 1024:.1f} MiB before",
            f"{peak / 1024:.1f} MiB peak",
            f"+{(peak - before) / 1024:.1f} MiB",
        ]
    ]


async def stream_rows(up: int, proxy: int, pid: int, sizes: Sizes) -> list[list[str]]:
    body = orjson.dumps(
        {
            "model": "bench-model",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_mb": sizes.stream_mb,
        }
    )
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.02)

    conn = await Connection.open("127.0.0.1", up)
    t = time.perf_counter()
    _, direct_bytes = await conn.post("/v1/chat/completions", body)
    t_direct = time.perf_counter() - t
    await conn.close()
    conn = await Connection.open("127.0.0.1", proxy)
    await conn.post("/v1/chat/completions", REQUEST)
    before = rss_kib(pid)
    sampler = threading.Thread(target=sample)
    sampler.start()
    t = time.perf_counter()
    _, relayed = await conn.post("/v1/chat/completions", body)
    t_proxy = time.perf_counter() - t
    stop.set()
    sampler.join()
    await conn.close()
    assert relayed == direct_bytes, f"relayed {relayed} bytes of {direct_bytes}"
    mb = relayed / 1e6
    return [
        [
            f"stream {mb:.0f} MB relayed: time",
            f"{t_direct * 1000:.0f} ms",
            f"{t_proxy * 1000:.0f} ms",
            f"{t_proxy / t_direct:.2f}x",
        ],
        [
            f"stream {mb:.0f} MB relayed: proxy RSS",
            f"{before / 1024:.1f} MiB before",
            f"{peak[0] / 1024:.1f} MiB peak",
            f"+{(peak[0] - before) / 1024:.1f} MiB",
        ],
    ]


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {system}"


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join(
        [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]
    )


async def hostile_section(proxy: int, sizes: Sizes, only: str | None = None) -> str:
    # --quick (the smoke test): one admitted route and the refused bodies, not every route.
    only = only or ("chat completions,refused" if sizes is QUICK else None)
    rows = await hostile_rows(proxy, sizes.hostile_seconds, only)
    return (
        "## Another team's small requests while the largest bodies each route admits run on "
        "it\n\n" + table(HOSTILE_HEADER, rows)
    )


async def shadow_section(floor: int, proxy: int, sizes: Sizes) -> str:
    """Shadow mode beside the floor and the enforced proxy (bench/shadow.py)."""
    small = [(fmt, path, [body] * max(sizes.sequential // 8, 20)) for fmt, path, body in FORMATS]
    small.append(("chat, 118k-token resend", "/v1/chat/completions", [resend_body(118_000)] * 10))
    conversations = agent_sized.passes(sizes.agent_passes)
    agent = [
        (f"{fmt}, agent-sized", path, [write(m) for c in conversations for m in c])
        for fmt, path, write in agent_sized.FORMATS
    ]
    rows = await shadow_rows(floor, proxy, small, agent, rounds=4 if sizes is FULL else 2)
    return (
        "## Shadow mode vs the enforcing proxy and the pass-through floor (same process, the "
        "same requests in blocks taken in turn)\n\n" + table(SHADOW_HEADER, rows)
    )


async def shadow_only(sizes: Sizes) -> str:
    """The shadow table alone (``--only shadow``)."""
    with tempfile.TemporaryDirectory() as data, processes(data) as (_, _, proxy, _, floor):
        async with httpx.AsyncClient() as warm:
            await warm.post(f"http://127.0.0.1:{proxy}/v1/chat/completions", content=REQUEST)
        return await shadow_section(floor, proxy, sizes)


async def hostile_only(sizes: Sizes, only: str | None) -> str:
    """The hostile table alone (``--only hostile``)."""
    with tempfile.TemporaryDirectory() as data, processes(data) as (_, _, proxy, _, _):
        async with httpx.AsyncClient() as warm:
            await warm.post(f"http://127.0.0.1:{proxy}/v1/chat/completions", content=REQUEST)
        return await hostile_section(proxy, sizes, only)


def resend_only(sizes: Sizes) -> str:
    """The large resend as a user's client sees it (``--only resend``: bench/resend.py)."""
    rounds, per_round = (2, 2) if sizes is QUICK else (10, 5)
    return "## " + resend_section(rounds, per_round)


async def main_async(sizes: Sizes) -> str:
    sections = []
    with tempfile.TemporaryDirectory() as data, processes(data) as (up, slow, proxy, pid, floor):
        async with httpx.AsyncClient() as warm:  # first request loads tokenizers in the proxy
            await warm.post(f"http://127.0.0.1:{proxy}/v1/chat/completions", content=REQUEST)
        sections.append(
            "## Proxy vs the pass-through floor (starlette + one pooled httpx client, no "
            "parsing; same run; sent by httpx with keep-alive and Authorization, as a user's "
            "client: the harness changed on 2026-12-06, figures before are not comparable)\n\n"
            + table(
                [
                    "measure",
                    "direct",
                    "floor",
                    "via proxy",
                    "floor adds",
                    "proxy adds",
                    "over floor",
                ],
                await floor_rows(up, floor, proxy, sizes)
                + await agent_rows(up, floor, proxy, sizes),
            )
        )
        sections.append(await shadow_section(floor, proxy, sizes))
        rows = await latency_rows(up, proxy, sizes)
        rows += await throughput_rows(up, slow, proxy, sizes)
        rows += await stream_rows(up, proxy, pid, sizes)
        rows += await slow_client_rows(proxy, pid, min(sizes.stream_mb, 8))
        sections.append(
            "## Proxy vs direct (requests that need no trimming)\n\n"
            + table(["measure", "direct", "via proxy", "ratio / added"], rows)
        )
        sections.append(await hostile_section(proxy, sizes))
        load = await load_rows(proxy, lambda: rss_kib(pid), sizes.load_clients, sizes.load_seconds)
        sections.append(
            "## Load: concurrent streams, each checked byte for byte\n\n"
            + table(["run", "streams", "correct", "failures"], load)
        )
    return "\n\n".join(sections)


# Sections that run on their own (``--only``), in process: what keeps what an agent needs.
OWN = {
    "fidelity": "Fidelity: items a model still sees after 2 and 3 trim cycles (CompactBench, "
    "hard-needle; weighted kept, controls on the same budget)",
    "ledger": "The ledger's reading: recall on the fidelity set (ledger alone), what it reads "
    "of real user turns (ShareGPT) and how much of it is false (labelled sample)",
    "outputs": "Tool outputs re-encoded, by kind (tokens, o200k)",
    "recall": "Recall on the long-task workload (scripted agent; re-runs of a tool)",
    "rules": "Standing rules kept without a pin (conpact's 15 side constraints, 4k budget)",
    "soak": "Soak: distinct conversations through one process, at the default memory budget",
}


def own_sections(names: list[str], quick: bool, summarizer: Summarizer | None = None) -> str:
    rows: dict[str, Callable[[bool], tuple[list[str], list[list[str]]]]] = {
        "fidelity": lambda q: fidelity_rows(q, summarizer),
        "ledger": ledger_rows,
        "outputs": output_rows,
        "recall": recall_rows,
        "rules": rules_rows,
        "soak": soak_rows,
    }
    return "\n\n".join(f"## {OWN[n]}\n\n" + table(*rows[n](quick)) for n in names)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md")
    parser.add_argument(
        "--only",
        help="comma-separated sections to run alone: hostile, shadow, resend, "
        f"{', '.join(OWN)} (print only; BENCHMARKS.md is left as it is)",
    )
    parser.add_argument("--route", help="with --only hostile: the routes whose label holds this")
    parser.add_argument(
        "--summarizer-url",
        help="fidelity: also summarize with this OpenAI-compatible server (base URL with /v1)",
    )
    parser.add_argument("--summarizer-model", default="gpt-4o-mini", help="its model's name")
    parser.add_argument(
        "--summarizer-key-env",
        default="OPENAI_API_KEY",
        help="the variable that holds its key (set it to anything for a local server)",
    )
    args = parser.parse_args()
    summarizer = None
    if args.summarizer_url:
        summarizer = Summarizer(
            url=args.summarizer_url, model=args.summarizer_model, key_env=args.summarizer_key_env
        )
    sizes = QUICK if args.quick else FULL
    if args.only == "hostile":
        print(asyncio.run(hostile_only(sizes, args.route)))
        return 0
    if args.only == "shadow":
        print(asyncio.run(shadow_only(sizes)))
        return 0
    if args.only == "resend":
        print(resend_only(sizes))
        return 0
    if args.only:
        names = [n.strip() for n in args.only.split(",")]
        unknown = [n for n in names if n not in OWN]
        if unknown:
            parser.error(
                f"unknown section(s) {', '.join(unknown)}: use hostile, shadow, resend or "
                f"{', '.join(OWN)}"
            )
        print(own_sections(names, args.quick, summarizer))
        return 0
    body = asyncio.run(main_async(sizes))
    body += "\n\n## Decision time (count + trim) as agent conversations grow\n\n"
    body += table(*decision_rows(sizes.conversation_tokens))
    body += (
        "\n\n## Parsing, viewing and digesting an agent's requests (in process, per request)\n\n"
    )
    body += table(*format_rows(args.quick))
    body += "\n\n" + (HERE / "speed_before.md").read_text().strip()
    body += "\n\n" + (HERE / "choices.md").read_text().strip()
    body += "\n\n## Trimming quality against litellm.utils.trim_messages\n\n"
    body += table(*quality_rows(sizes.quality_cases))
    body += "\n\n## Summarizer calls as conversations grow (demo upstream, summaries on)\n\n"
    body += table(*summary_rows(args.quick))
    body += "\n\n" + (HERE / "summaries_before.md").read_text().strip()
    body += "\n\n## Cache economy against trim_messages and untrimmed (summaries on)\n\n"
    body += table(*economy_rows(args.quick))
    body += "\n\n## Sticky cuts: prefix kept by family, beside the summarizer (summaries on)\n\n"
    body += table(*family_rows(args.quick))
    body += "\n\n" + (HERE / "families_before.md").read_text().strip()
    body += "\n\n" + own_sections(list(OWN), args.quick, summarizer)
    command = "python -m bench" + (" --quick" if args.quick else "")
    targets = (HERE / "targets.md").read_text()
    when = time.strftime("%Y-%m-%d")
    report = f"# Benchmarks\n\n`{command}` on {machine()}; {when}.\n\n{body}\n\n{targets}"
    print(report)
    if not args.no_write:
        (HERE.parent / "BENCHMARKS.md").write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
