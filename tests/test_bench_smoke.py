"""The benchmark command still runs (tiny sizes; nothing is timed or asserted about speed)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_quick_runs_and_prints_every_section(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--no-write"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for section in (
        "Proxy vs direct",
        "pass-through floor",
        "Shadow mode vs the enforcing proxy",
        "Load:",
        "the largest bodies each route admits",
        "Decision time",
        "Parsing, viewing and digesting",
        "Trimming quality",
        "Summarizer calls",
        "Sticky cuts: prefix kept by family",
        "Tool outputs re-encoded, by kind",
        "Recall on the long-task workload",
        "Standing rules kept without a pin",
        "Soak: distinct conversations",
        "Fidelity: items a model still sees",
    ):
        assert section in out
    assert "throughput, 50 ms upstream, concurrency 16" in out
    assert "latency p50, chat, 118k-token resend" in out
    assert "| contextwarden (default)" in out and "| litellm" in out
    assert "0 wrong, 0 errors" in out
    assert "| agent tool loops" in out and "| all families" in out
    assert "| JSON outputs parsed back to a different value | 0 " in out
    assert "| chat, 16k | recall: true | 0 " in out  # no re-run with recall


def test_request_path_traces_each_kind_of_request() -> None:
    """bench.request_path: the engine runs only for a trimmed request, and the request path's
    climbs up the import graph are the two callbacks it is built on (the overflow loop's send,
    the ASGI middleware) plus the tokenizer the proxy injects into the engine."""
    from bench.request_path import above, climbs, import_graph, trace_all

    importers = above(import_graph())
    traces = dict(asyncio.run(trace_all()))
    fits = traces["chat, fits (actions: none)"]
    trimmed = traces["chat, trimmed (actions: truncate_oldest,ledger)"]
    assert "strategies.engine" not in fits.files and "strategies.engine" in trimmed.files
    assert "proxy.edge.exchange" in fits.files and "proxy.formats.chat" in fits.files
    assert set(climbs(trimmed, importers)) <= {
        ("proxy.overflow.retry", "proxy.edge.exchange"),
        ("proxy.paths", "proxy.app"),
        ("strategies.tokens", "proxy.windows.tokenizers"),
    }
    for name in ("responses, trimmed", "messages, trimmed"):
        assert any(k.startswith(name) and "truncate_oldest" in k for k in traces), traces.keys()


def test_the_chains_bench_prints_its_three_figures() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.chains"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = [float(x) for x in re.findall(r"(\d+\.\d+) ms", done.stdout)]
    assert len(figures) == 3 and all(f > 0 for f in figures), done.stdout


@pytest.mark.slow
def test_bench_otel_runs_and_prints_its_rows() -> None:
    """``python -m bench.otel --quick`` (OpenTelemetry's cost per request; nothing timed here)."""
    result = subprocess.run(
        [sys.executable, "-m", "bench.otel", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [
        line for line in result.stdout.splitlines() if line.startswith("| ") and " us |" in line
    ]
    assert [row.split(" | ")[0] for row in rows] == [
        "| off (Prometheus alone)",
        "| spans and metrics, not exported",
        "| exported over OTLP/HTTP (encoding counted)",
        "| exported, 1 trace in 10 sampled",
    ], result.stdout


@pytest.mark.slow
def test_the_resend_bench_prints_every_case() -> None:
    """``--only resend`` (bench/resend.py): the upstream, the bare pass-through and the proxy
    each answer the agent's resend, the proxy counting exactly and doing nothing (the run
    stops with an error otherwise)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "resend", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for model in ("resend-200k", "resend-1m"):
        for auth in ("with", "no"):
            assert f"p50, {model}, {auth} Authorization" in done.stdout
    assert "140 messages" in done.stdout
