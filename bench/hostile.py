"""Another team's small requests while three maximum-size hostile bodies are in flight.

Three sender processes (team ``hostile``) post bodies just under the byte limit, without pause:
one kind the proxy must refuse (a million tiny Responses items: 413 after the node count), one
it must accept and fit (a few tens of thousands of long messages: parsed, counted and cut). A
client of team ``default`` meanwhile sends small chat requests one after another; their
latency is compared with the same client's before the senders start, in the same run.
"""

from __future__ import annotations

import asyncio
import http.client
import multiprocessing
import time

import orjson

from bench.client import Connection

SMALL = orjson.dumps({"model": "bench-model", "messages": [{"role": "user", "content": "hi"}]})
LIMIT = 32 * 1024 * 1024


def refused_body() -> bytes:
    items = [{"role": "user", "content": "x"}] * 1_000_000
    return orjson.dumps({"model": "bench-model", "input": items})


def accepted_body() -> bytes:
    text = "the quick brown fox jumps over the lazy dog " * 30
    count = (LIMIT - 4096) // (len(text) + 40)
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text} for i in range(count)
    ]
    return orjson.dumps({"model": "bench-model", "messages": messages, "max_tokens": 64})


def send_forever(port: int, kind: str, seconds: float, sent: multiprocessing.Queue[int]) -> None:
    body, path = (refused_body(), "/v1/responses") if kind == "refused" else (
        accepted_body(), "/v1/chat/completions")  # fmt: skip
    assert len(body) < LIMIT
    deadline = time.monotonic() + seconds
    statuses: list[int] = []
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            headers = {"content-type": "application/json", "x-contextwarden-team": "hostile"}
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
        except OSError:
            statuses.append(0)
        finally:
            conn.close()
    for status in statuses:
        sent.put(status)


async def small_latencies(port: int, seconds: float) -> list[float]:
    conn = await Connection.open("127.0.0.1", port)
    out: list[float] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            status, _ = await conn.post("/v1/chat/completions", SMALL)
            out.append(time.perf_counter() - started)
            assert status == 200, status
            await asyncio.sleep(0.005)
    finally:
        await conn.close()
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def hostile_rows(proxy: int, seconds: float) -> list[list[str]]:
    quiet = await small_latencies(proxy, min(seconds, 5))
    context = multiprocessing.get_context("spawn")
    sent: multiprocessing.Queue[int] = context.Queue()
    kinds = ["refused", "accepted", "refused"]
    senders = [
        context.Process(target=send_forever, args=(proxy, kind, seconds + 5, sent))
        for kind in kinds
    ]
    for p in senders:
        p.start()
    await asyncio.sleep(5)  # the senders build their bodies and have the first ones in flight
    loaded = await small_latencies(proxy, seconds)
    for p in senders:
        p.join(timeout=300)
    statuses: list[int] = []
    while not sent.empty():
        statuses.append(sent.get())
    tally = {s: statuses.count(s) for s in sorted(set(statuses))}
    hostile = ", ".join(f"{n}x {s}" for s, n in tally.items())
    return [
        [
            "small requests of another team, p50",
            f"{pct(quiet, 0.5) * 1000:.2f} ms",
            f"{pct(loaded, 0.5) * 1000:.2f} ms",
            f"{len(loaded)} requests",
        ],
        [
            "small requests of another team, p99",
            f"{pct(quiet, 0.99) * 1000:.2f} ms",
            f"{pct(loaded, 0.99) * 1000:.2f} ms",
            f"hostile bodies answered: {hostile}",
        ],
    ]
