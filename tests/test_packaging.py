"""A plain ``pip install .`` (the Dockerfile's) ships every package the proxy imports."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_every_package(tmp_path: Path) -> None:
    source = tmp_path / "src"  # a clean copy: no build/ left over from an earlier build
    for name in ("proxy", "strategies"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(source)],
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    wheel = next(tmp_path.glob("contextwarden-*.whl"))
    shipped = {Path(n).parent.as_posix() for n in zipfile.ZipFile(wheel).namelist()}
    packages = {
        p.parent.relative_to(ROOT).as_posix()
        for top in ("proxy", "strategies")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert packages <= shipped, packages - shipped
