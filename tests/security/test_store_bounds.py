"""F4 of #55, bounded disk state: recall originals had no disk bound (each ~30 MB request
with cleared tool outputs added ~30 MB for 7 days, ~8 GB an hour from one key, until a full
disk failed every team's writes). Every stored object is now charged to its team and kept
under a per-team and a total bound, the oldest out first (proxy/stores/quota.py).

The day of recall-heavy traffic is scaled down: bounds of kilobytes, outputs of tens of
kilobytes, a hundred requests (each worth ~5x the team's bound over the run)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.redis_server import redis_server
from tests.e2e.topology import wait_for
from tests.security.conftest import (
    ADMIN_KEY,
    OTHER_KEY,
    TEAM_KEY,
    Capture,
    ProxyFactory,
    keys_config,
)

TOTAL = 1 << 20  # the store's bound (the smallest max_bytes takes)
PER_TEAM = 256 << 10
OUTPUT = 24 << 10  # bytes of one tool output, cleared in the forwarded prompt
FLOOD = 100  # the flooding team's requests: ~12 MB of originals against a 256 KB share


def conversation(n: int, outputs: int = 4) -> dict[str, Any]:
    """A chat with ``outputs`` tool calls whose outputs (unique to ``n``) overflow the window:
    the proxy clears them and keeps their originals for recall."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": f"task {n}: read the files"},
    ]
    for i in range(outputs):
        call = {"id": f"c{n}-{i}", "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "f{n}-{i}.txt"}}'}}  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        text = "".join(f"request {n} file {i} line {k}: value {k * n}\n" for k in range(900))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": text[:OUTPUT]})
    messages.append({"role": "user", "content": "and now?"})
    return {"model": "gpt-4o", "messages": messages, "max_tokens": 100}


def bounded(capture: Capture, checkpoints: dict[str, Any]) -> dict[str, Any]:
    return keys_config(
        capture,
        models={"gpt-4o": {"context_window": 8000}},
        policies={"default": {"summarize": False, "recall": True}},
        checkpoints={"max_bytes": TOTAL, "max_bytes_per_team": PER_TEAM, **checkpoints},
    )


class SqliteBytes:
    """What the SQLite file holds, read from its rows (not from the store's own counts)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def by_team(self) -> dict[str, int]:
        with sqlite3.connect(self.path) as db:
            rows = db.execute(
                "SELECT owner, sum(length(key) + length(value)) FROM blobs "
                "WHERE owner IS NOT NULL GROUP BY owner"
            ).fetchall()
        return {str(owner): int(n) for owner, n in rows}

    def recall_keys(self, team: str) -> set[str]:
        with sqlite3.connect(self.path) as db:
            rows = db.execute(
                "SELECT key FROM blobs WHERE owner=? AND key LIKE 'recall%'", (team,)
            ).fetchall()
        return {str(k) for (k,) in rows}


class RedisBytes:
    """What Redis holds, read from the values themselves; each blob's team from the store's
    accounting (the only place a hashed conversation key's team is written)."""

    def __init__(self, url: str) -> None:
        import redis

        self.redis = redis.Redis.from_url(url)

    def by_team(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for key in self.redis.scan_iter(b"cw:blob:*"):
            meta = self.redis.hget("cw:q:meta", key + b"\0")
            if meta is None:  # outside the bounds (an ownership record)
                continue
            team = meta.split(b"\0", 1)[1].decode()
            out[team] = out.get(team, 0) + len(key) + int(self.redis.strlen(key))
        return out

    def recall_keys(self, team: str) -> set[str]:
        keys = set()
        for key in self.redis.scan_iter(b"cw:blob:recall*"):
            meta = self.redis.hget("cw:q:meta", key + b"\0")
            if meta is not None and meta.split(b"\0", 1)[1].decode() == team:
                keys.add(key.decode())
        return keys


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[dict[str, Any], Any]]:
    if request.param == "sqlite":
        data = tmp_path / "data"
        yield {}, SqliteBytes(data / "checkpoints.sqlite3")
        return
    (tmp_path / "redis").mkdir()
    with redis_server(tmp_path / "redis") as url:
        yield {"backend": "redis", "url": url}, RedisBytes(url)


def test_a_day_of_recall_heavy_traffic_from_one_key_keeps_the_store_bounded(
    backend: tuple[dict[str, Any], Any], capture: Capture, make_proxy: ProxyFactory
) -> None:
    config, stored = backend
    proxy = make_proxy(**bounded(capture, config))
    with proxy.client(OTHER_KEY) as other:
        for n in range(2):
            assert other.post("/v1/chat/completions", json=conversation(n)).status_code == 200
    # Written after the answers (proxy/stores/writer.py): 4 originals and an index each.
    wait_for(lambda: len(stored.recall_keys("other")) == 10, "the other team's originals")
    before = stored.recall_keys("other")
    with proxy.client(TEAM_KEY) as flood:
        for n in range(100, 100 + FLOOD):
            answer = flood.post("/v1/chat/completions", json=conversation(n))
            assert answer.status_code == 200, answer.text  # eviction fails no request
            teams = stored.by_team()
            assert sum(teams.values()) <= TOTAL, teams
            assert all(held <= PER_TEAM for held in teams.values()), teams
    # It keeps what its share holds (the last writes land after the last answer).
    wait_for(lambda: stored.by_team().get("limited", 0) > PER_TEAM // 2, "the flood's writes")
    assert stored.recall_keys("other") == before  # one team's flood evicts only its own
    with proxy.client(ADMIN_KEY) as admin:
        figures = metric_values(admin.get("/metrics").text)
    assert figures['contextwarden_store_evictions_total{bound="team"}'] > 0
    assert 0 < figures["contextwarden_store_bytes"] <= TOTAL


def metric_values(text: str) -> dict[str, float]:
    """Prometheus's text format: each sample's name and labels, and its value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            sample, value = line.rsplit(" ", 1)
            out[sample] = float(value)
    return out
