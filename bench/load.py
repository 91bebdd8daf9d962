"""Load: many concurrent streaming clients for a bounded time, every response checked byte for
byte (the upstream's content is deterministic per seed), the proxy's memory sampled."""

from __future__ import annotations

import asyncio
import hashlib
import random
import time

import orjson

from bench.client import Connection
from bench.upstream import seeded_events


def expected_digest(seed: int) -> str:
    return hashlib.sha256(b"".join(seeded_events(seed))).hexdigest()


def received_digest(body: bytes) -> str:
    pieces = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            delta = orjson.loads(line[6:])["choices"][0]["delta"]
            pieces.append(delta.get("content", "").encode())
    assert body.rstrip().endswith(b"data: [DONE]"), "the stream did not finish"
    return hashlib.sha256(b"".join(pieces)).hexdigest()


async def load_rows(proxy: int, rss: object, clients: int, seconds: float) -> list[list[str]]:
    read_rss = rss  # a callable returning the proxy's RSS in KiB
    deadline = time.monotonic() + seconds
    counts = {"ok": 0, "bad": 0, "errors": 0}
    samples: list[int] = []
    rng = random.Random(3)

    async def client() -> None:
        conn = await Connection.open("127.0.0.1", proxy)
        try:
            while time.monotonic() < deadline:
                seed = rng.randrange(1_000_000)
                body = orjson.dumps(
                    {
                        "model": "bench-model",
                        "stream": True,
                        "messages": [{"role": "user", "content": "go"}],
                        "stream_seed": seed,
                    }
                )
                try:
                    status, _, data = await conn.request("/v1/chat/completions", body, keep=True)
                    good = status == 200 and received_digest(data) == expected_digest(seed)
                    counts["ok" if good else "bad"] += 1
                except (ConnectionError, AssertionError, ValueError, asyncio.IncompleteReadError):
                    counts["errors"] += 1
                    await conn.close()
                    conn = await Connection.open("127.0.0.1", proxy)
        finally:
            await conn.close()

    async def sampler() -> None:
        while time.monotonic() < deadline:
            samples.append(read_rss())  # type: ignore[operator]
            await asyncio.sleep(0.25)

    start_rss = read_rss()  # type: ignore[operator]
    started = time.monotonic()
    await asyncio.gather(sampler(), *(client() for _ in range(clients)))
    elapsed = time.monotonic() - started
    half = samples[len(samples) // 2 :] or samples
    total = counts["ok"] + counts["bad"] + counts["errors"]
    return [
        [
            f"{clients} streaming clients for {seconds:.0f} s",
            f"{total} streams",
            f"{counts['ok']} complete and byte-exact",
            f"{counts['bad']} wrong, {counts['errors']} errors",
        ],
        [
            "  proxy RSS during the load",
            f"{start_rss / 1024:.1f} MiB at start",
            f"{max(samples) / 1024:.1f} MiB peak",
            f"{min(half) / 1024:.1f}-{max(half) / 1024:.1f} MiB over the second half",
        ],
        ["  streams per second", f"{total / elapsed:.0f}/s", "", ""],
    ]
