"""The benchmark command still runs (tiny sizes; nothing is timed or asserted about speed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
        "Load:",
        "Decision time",
        "Trimming quality",
        "Summarizer calls",
    ):
        assert section in out
    assert "throughput, 50 ms upstream, concurrency 16" in out
    assert "| contextwarden (default)" in out and "| litellm" in out
    assert "0 wrong, 0 errors" in out
