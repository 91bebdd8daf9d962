"""Another team's small requests while hostile bodies run on every route that reads a body.

For each body-reading route in turn (the fitted formats, legacy completions, the preview, and
forwarded paths), two sender processes of team ``hostile`` post the largest body that route
admits, without pause: just under ``limits.max_body_bytes`` (32 MiB) and under
``limits.max_json_nodes`` (100,000 JSON values, every leaf counted). A client of team
``default`` meanwhile sends small chat requests one after another; their latency is compared
with the same client's before any sender starts, in the same run. A last row sends the bodies
the proxy must refuse (a million tiny Responses items, four million one-letter prompts: 413s
after the node count).
"""

from __future__ import annotations

import asyncio
import http.client
import multiprocessing
import time
from collections.abc import Callable

import orjson

from bench.client import Connection

SMALL = orjson.dumps({"model": "bench-model", "messages": [{"role": "user", "content": "hi"}]})
LIMIT = 32 * 1024 * 1024
NODES = 100_000
TEXT = "the quick brown fox jumps over the lazy dog " * 30  # 1,320 bytes


def _turns(key: str, extra: dict[str, object]) -> bytes:
    """A conversation under ``key`` of as many long turns as the byte limit holds (three JSON
    values a turn: about 74,000 in all, under the node cap)."""
    count = (LIMIT - 4096) // (len(TEXT) + 40)
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": TEXT} for i in range(count)]
    return orjson.dumps({**extra, key: turns})


def _strings(key: str, extra: dict[str, object]) -> bytes:
    """``key``: as many strings as fit under both caps (99,000 strings of 330 bytes)."""
    count = NODES - 1000
    size = (LIMIT - 4096) // count - 4
    return orjson.dumps({**extra, key: ["x" * size] * count})


CHAT = {"model": "bench-model", "max_tokens": 64}


def chat_body() -> bytes:
    return _turns("messages", CHAT)


def responses_body() -> bytes:
    return _turns("input", {"model": "bench-model"})


def messages_body() -> bytes:
    return _turns("messages", {"model": "bench-claude", "max_tokens": 64})


def count_tokens_body() -> bytes:
    return _turns("messages", {"model": "bench-claude"})


def prompts_body() -> bytes:
    return _strings("prompt", CHAT)


def inputs_body() -> bytes:
    return _strings("input", CHAT)


def items_body() -> bytes:
    """Refused: a million tiny Responses items."""
    items = [{"role": "user", "content": "x"}] * 1_000_000
    return orjson.dumps({"model": "bench-model", "input": items})


def letters_body() -> bytes:
    """Refused: four million one-letter prompts (two containers, four million leaves)."""
    return orjson.dumps({"model": "bench-model", "prompt": ["x"] * 4_000_000})


Build = Callable[[], bytes]  # module-level functions: the spawned senders import them
# (label, path, body): the largest body each route admits.
ROUTES: list[tuple[str, str, Build]] = [
    ("chat completions", "/v1/chat/completions", chat_body),
    ("responses", "/v1/responses", responses_body),
    ("messages", "/v1/messages", messages_body),
    ("completions (a batch of prompts)", "/v1/completions", prompts_body),
    ("preview", "/v1/contextwarden/preview", chat_body),
    ("forwarded: embeddings", "/v1/embeddings", inputs_body),
    ("forwarded: messages/count_tokens", "/v1/messages/count_tokens", count_tokens_body),
]
REFUSED: list[tuple[str, Build]] = [
    ("/v1/responses", items_body),
    ("/v1/completions", letters_body),
]


def send_forever(
    port: int,
    path: str,
    build: Callable[[], bytes],
    seconds: float,
    sent: multiprocessing.Queue[int],
) -> None:
    body = build()
    assert len(body) < LIMIT
    deadline = time.monotonic() + seconds
    statuses: list[int] = []
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
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


async def under_load(
    proxy: int, senders: list[tuple[str, Build]], seconds: float
) -> tuple[list[float], str]:
    """The small requests' latencies while ``senders`` post without pause, and what the
    hostile bodies were answered."""
    context = multiprocessing.get_context("spawn")
    sent: multiprocessing.Queue[int] = context.Queue()
    processes = [
        context.Process(target=send_forever, args=(proxy, path, build, seconds + 8, sent))
        for path, build in senders
    ]
    for p in processes:
        p.start()
    await asyncio.sleep(8)  # the senders build their bodies and have the first ones in flight
    loaded = await small_latencies(proxy, seconds)
    for p in processes:
        p.join(timeout=600)
    statuses: list[int] = []
    while not sent.empty():
        statuses.append(sent.get())
    tally = {s: statuses.count(s) for s in sorted(set(statuses))}
    return loaded, ", ".join(f"{n}x {s}" for s, n in tally.items())


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


async def hostile_rows(proxy: int, seconds: float, only: str | None = None) -> list[list[str]]:
    """One row per route: p50, p99 and the slowest of another team's small requests while two
    of the route's largest bodies run (``only``: the rows whose label holds one of its
    comma-separated words; the refused bodies' row is ``refused``)."""
    wanted = [w.strip() for w in only.split(",")] if only else []

    def chosen(label: str) -> bool:
        return not wanted or any(w in label for w in wanted)

    quiet = await small_latencies(proxy, min(seconds, 5))
    rows = [
        [
            "quiet (no hostile body)",
            ms(pct(quiet, 0.5)),
            ms(pct(quiet, 0.99)),
            ms(max(quiet)),
            f"{len(quiet)} requests",
            "",
        ]
    ]
    for label, path, build in ROUTES:
        if not chosen(label):
            continue
        loaded, answered = await under_load(proxy, [(path, build), (path, build)], seconds)
        rows.append(
            [
                f"two largest admitted bodies on {label} ({path})",
                ms(pct(loaded, 0.5)),
                ms(pct(loaded, 0.99)),
                ms(max(loaded)),
                f"{len(loaded)} requests",
                answered,
            ]
        )
    if chosen("refused bodies"):
        loaded, answered = await under_load(proxy, REFUSED, seconds)
        rows.append(
            [
                "refused bodies: 1M Responses items, 4M one-letter prompts",
                ms(pct(loaded, 0.5)),
                ms(pct(loaded, 0.99)),
                ms(max(loaded)),
                f"{len(loaded)} requests",
                answered,
            ]
        )
    return rows


HEADER = [
    "another team's small requests while",
    "p50",
    "p99",
    "slowest",
    "",
    "hostile bodies answered",
]
