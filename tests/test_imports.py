"""Every module imports on its own in a fresh interpreter: no import cycle hides behind the
order in which the app happens to import things."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules() -> list[str]:
    found = []
    for package in ("proxy", "strategies"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_each_module_imports_alone() -> None:
    script = (
        "import importlib, subprocess, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    done = subprocess.run([sys.executable, '-c', f'import {name}'], capture_output=True)\n"
        "    if done.returncode:\n"
        "        failed.append((name, done.stderr.decode()[-400:]))\n"
        "print(failed)\n"
        "sys.exit(1 if failed else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *modules()], cwd=ROOT, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stdout.decode()
