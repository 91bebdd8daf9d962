"""Every module imports on its own in a fresh interpreter: no import cycle hides behind the
order in which the app happens to import things."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def modules() -> list[str]:
    found = []
    for package in ("proxy", "strategies"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


@pytest.mark.slow
def test_each_module_imports_alone() -> None:
    # One fresh interpreter per module, as many at a time as there are cores.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = list(pool.map(_import_alone, modules()))
    failed = [(name, err) for name, code, err in runs if code]
    assert failed == [], failed


def _import_alone(name: str) -> tuple[str, int, str]:
    done = subprocess.run(
        [sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True, timeout=300
    )
    return name, done.returncode, done.stderr.decode()[-400:]
