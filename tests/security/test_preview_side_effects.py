"""A preview is a dry run: no summarizer call, no checkpoint, no learned window; the CLI and
the endpoint agree; a real summary only through the admin API, on request."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from proxy.app import create_app
from proxy.cli import main
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.conftest import first_request_summaries
from tests.e2e.test_checkpoints import over_budget_conversation

ADMIN = "cw-admin-preview"


@contextmanager
def stack(tmp_path: Path) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    app = create_upstream(window=1024)
    with BackgroundServer(app) as demo:
        config: dict[str, Any] = first_request_summaries(
            {
                "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
                "models": {"demo-model": {"context_window": 1024, "tokenizer": "o200k_base"}},
                "data_dir": str(tmp_path / "data"),
                "admin_key_env": "ADMIN_KEY",
            }
        )
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            yield proxy, app, config


def body(turns: int = 16) -> dict[str, Any]:
    return {"model": "demo-model", "messages": over_budget_conversation(turns), "max_tokens": 64}


def stored_checkpoints(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "data" / "checkpoints.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM checkpoints").fetchone()[0])


@pytest.fixture(autouse=True)
def admin_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADMIN_KEY", ADMIN)


def test_a_preview_never_summarizes_nor_writes(tmp_path: Path) -> None:
    with stack(tmp_path) as (proxy, upstream, _):
        report = httpx.post(f"{proxy.url}/v1/contextwarden/preview", json=body()).json()["report"]
        admin = httpx.post(
            f"{proxy.url}/admin/preview", json=body(), headers={"authorization": f"Bearer {ADMIN}"}
        ).json()["report"]
        summaries = len(upstream.state.summaries)
        received = len(upstream.state.received)
    assert summaries == 0 and received == 0
    assert stored_checkpoints(tmp_path) == 0
    for r in (report, admin):
        assert r["checkpoint"].startswith("would-summarize ")
        assert "messages (about" in r["checkpoint"]
        assert "summarize" in r["actions"]
        assert r["tokens_after"] <= r["budget"]


def test_a_preview_reports_a_checkpoint_it_would_reuse(tmp_path: Path) -> None:
    with stack(tmp_path) as (proxy, upstream, _):
        real = httpx.post(f"{proxy.url}/v1/chat/completions", json=body(), timeout=30)
        made = real.headers["x-contextwarden-checkpoint"].split()[1]
        calls = len(upstream.state.summaries)
        report = httpx.post(f"{proxy.url}/v1/contextwarden/preview", json=body()).json()["report"]
        assert len(upstream.state.summaries) == calls
    assert report["checkpoint"] == f"reused {made}"


def test_a_real_summary_only_through_the_admin_api(tmp_path: Path) -> None:
    with stack(tmp_path) as (proxy, upstream, _):
        refused = httpx.post(f"{proxy.url}/v1/contextwarden/preview?summarize=true", json=body())
        assert refused.status_code == 403
        assert len(upstream.state.summaries) == 0
        real = httpx.post(
            f"{proxy.url}/admin/preview?summarize=true",
            json=body(),
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=30,
        ).json()["report"]
        assert len(upstream.state.summaries) >= 1
    assert real["checkpoint"].startswith("created ")


def test_the_cli_and_the_endpoint_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with stack(tmp_path) as (proxy, _, config):
        http = httpx.post(f"{proxy.url}/v1/contextwarden/preview", json=body()).json()["report"]
        path = tmp_path / "cw.yaml"
        path.write_text(yaml.safe_dump(config))
        request = tmp_path / "body.json"
        request.write_bytes(orjson.dumps(body()))
        assert main(["preview", str(request), "--config", str(path), "--json"]) == 0
    cli = orjson.loads(capsys.readouterr().out)["report"]
    for key in ("actions", "checkpoint", "tokens_before", "tokens_after", "budget"):
        assert cli[key] == http[key], key


def test_preview_into_a_closed_pipe_prints_no_traceback(tmp_path: Path) -> None:
    request = tmp_path / "body.json"
    request.write_bytes(orjson.dumps(body(40)))
    path = tmp_path / "cw.yaml"
    config = {
        "upstreams": {"demo": {"base_url": "http://127.0.0.1:9/v1"}},
        "models": {"demo-model": {"context_window": 1024, "tokenizer": "o200k_base"}},
        "data_dir": str(tmp_path / "data"),
    }
    path.write_text(yaml.safe_dump(config))
    command = f"{sys.executable} -m proxy.cli preview {request} --config {path} --json | head -n 1"
    done = subprocess.run(command, shell=True, capture_output=True, timeout=120)
    assert done.stdout.strip() == b"{"
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr
