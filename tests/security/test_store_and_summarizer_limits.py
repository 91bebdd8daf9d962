"""A store outage, a slow or costly summary, and one team's appetite are all bounded."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.conftest import first_request_summaries
from tests.e2e.test_checkpoints import over_budget_conversation

MODEL = "demo-model"


@contextmanager
def stack(tmp_path: Path, summary_delay: float = 0.0, **extra: Any) -> Iterator[Any]:
    app = create_upstream(window=1024, summary_delay=summary_delay)
    with BackgroundServer(app) as demo:
        config = first_request_summaries(
            {
                "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
                "models": {MODEL: {"context_window": 1024, "tokenizer": "o200k_base"}},
                "data_dir": str(tmp_path / "data"),
                **extra,
            }
        )
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            proxy.upstream_app = app  # type: ignore[attr-defined]
            yield proxy


def timed_request(
    proxy: Any, turns: int = 16, key: str = "sk", salt: str = "", **extra: Any
) -> tuple[Any, float]:
    """``salt`` makes a conversation of its own (another first message)."""
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0) as client:
        messages = over_budget_conversation(turns)
        if salt:
            messages[0] = {**messages[0], "content": f"{salt}: {messages[0]['content']}"}
        started = time.monotonic()
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, max_tokens=64, **extra
        )
        return raw, time.monotonic() - started


@contextmanager
def silent_server() -> Iterator[int]:
    """Accepts connections and never answers: a hung Redis."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def test_a_dead_redis_costs_at_most_a_second(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    redis = {"backend": "redis", "url": f"redis://127.0.0.1:{dead}/0"}
    with stack(tmp_path, checkpoints=redis) as proxy:
        raw, elapsed = timed_request(proxy)
        again, elapsed_again = timed_request(proxy)  # the store rests: skipped at once
    assert raw.http_response.status_code == again.http_response.status_code == 200
    assert "truncate_oldest" in raw.headers["x-contextwarden-actions"]
    assert elapsed < 2.5
    assert elapsed_again < 1.0


def test_a_hung_redis_costs_at_most_a_second(tmp_path: Path) -> None:
    with silent_server() as port:
        redis = {"backend": "redis", "url": f"redis://127.0.0.1:{port}/0", "timeout_seconds": 0.5}
        with stack(tmp_path, checkpoints=redis) as proxy:
            raw, elapsed = timed_request(proxy)
    assert raw.http_response.status_code == 200
    assert elapsed < 2.0


def test_an_sqlite_file_locked_by_another_process_costs_at_most_a_second(tmp_path: Path) -> None:
    with stack(tmp_path) as proxy:
        db = sqlite3.connect(tmp_path / "data" / "checkpoints.sqlite3", isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")  # another process holds the file
        try:
            raw, elapsed = timed_request(proxy)
        finally:
            db.execute("ROLLBACK")
            db.close()
    assert raw.http_response.status_code == 200
    assert elapsed < 3.0


def test_a_corrupt_sqlite_file_is_moved_aside(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "checkpoints.sqlite3").write_bytes(b"this is not a database" * 100)
    with stack(tmp_path) as proxy:
        raw, _ = timed_request(proxy)
        assert raw.headers["x-contextwarden-checkpoint"].startswith("created")
    assert len(list(data.glob("checkpoints.sqlite3.corrupt-*"))) == 1


def test_an_unwritable_data_dir_disables_checkpoints_loudly(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file where the directory should be")
    with stack(tmp_path) as proxy:
        raw, elapsed = timed_request(proxy)
        metrics = httpx.get(f"{proxy.url}/metrics").text
    assert raw.http_response.status_code == 200
    assert "truncate_oldest" in raw.headers["x-contextwarden-actions"]
    assert "contextwarden_checkpoints_disabled 1.0" in metrics
    assert elapsed < 2.0


def summarizer_calls(tmp_path: Path, cap: int) -> tuple[Any, list[dict[str, Any]]]:
    """The answer and the summarizer calls of a long first request (a small summarizer window
    cuts its history into many pieces, a call each)."""
    summarizer = {"context_window": 700, "max_tokens": 64, "max_calls_per_request": cap}
    with stack(tmp_path, policies={"default": {"summarizer": summarizer}}) as proxy:
        raw, _ = timed_request(proxy, turns=40)
        return raw, list(proxy.upstream_app.state.summaries)


def test_one_request_makes_at_most_its_allowance_of_summarizer_calls(tmp_path: Path) -> None:
    _, uncapped = summarizer_calls(tmp_path / "a", 50)
    raw, capped = summarizer_calls(tmp_path / "b", 2)
    assert len(uncapped) > 2
    assert raw.http_response.status_code == 200
    assert "summarize" in raw.headers["x-contextwarden-actions"]  # the recent pieces, summarized
    assert len(capped) == 2
    # The older pieces went unsummarized; the conversation's opening message (its task) went
    # into the first call, so the summary still says what the conversation was for.
    opening = str(over_budget_conversation(40)[1]["content"])
    assert opening in orjson.dumps(capped[0]).decode()


@pytest.mark.slow
def test_the_summarizing_deadline_bounds_the_wait(tmp_path: Path) -> None:
    summarizer = {"timeout": 5, "deadline_seconds": 0.8}
    with stack(tmp_path, summary_delay=3, policies={"default": {"summarizer": summarizer}}) as p:
        raw, elapsed = timed_request(p)
    assert raw.http_response.status_code == 200
    assert "truncate_oldest" in raw.headers["x-contextwarden-actions"]
    assert elapsed < 2.0


def test_a_teams_hourly_summarizer_cap_holds(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("ADMIN_KEY", "cw-admin")
    teams = {"default": {"summarizer_calls_per_hour": 1}}
    with stack(tmp_path, teams=teams, admin_key_env="ADMIN_KEY") as proxy:
        first, _ = timed_request(proxy, turns=16)
        other, _ = timed_request(proxy, turns=18, extra_body={"user": "another conversation"})
        stats = httpx.get(
            f"{proxy.url}/admin/stats", headers={"authorization": "Bearer cw-admin"}
        ).json()
        summaries = len(proxy.upstream_app.state.summaries)
    assert "summarize" in first.headers["x-contextwarden-actions"]
    assert summaries == 1
    assert other.http_response.status_code == 200
    assert stats["summarizer_by_team"]["default"]["calls"] == 1
    assert stats["summarizer_by_team"]["default"]["left_this_hour"] == 0


def test_one_teams_spent_cap_never_switches_off_another_teams_summaries(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Team a's summarizer cap is spent; its refused attempts are no summarizer failure, and
    breakers are per team: team b, with calls left, gets a summary for every conversation."""
    monkeypatch.setenv("A_KEY", "cw-a")
    monkeypatch.setenv("B_KEY", "cw-b")
    teams = {
        "a": {"key_envs": ["A_KEY"], "summarizer_calls_per_hour": 1},
        "b": {"key_envs": ["B_KEY"], "summarizer_calls_per_hour": 100},
    }
    with stack(tmp_path, teams=teams, auth="keys") as proxy:
        for i in range(6):  # the cap is spent after the first; five refusals follow
            timed_request(proxy, turns=16, key="cw-a", salt=f"a{i}")
        b = [timed_request(proxy, turns=16, key="cw-b", salt=f"b{i}")[0] for i in range(4)]
    assert all("summarize" in r.headers["x-contextwarden-actions"] for r in b)
