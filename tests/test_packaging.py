"""A plain ``pip install .`` (the Dockerfile's) ships every package the proxy imports."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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


def closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` install, with theirs (as installed here)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for extra_of_req in ["", *req.extras]:
            todo += [(Requirement(r), extra_of_req) for r in requires]
    return seen


def dev_only_modules() -> set[str]:
    """The top-level modules that only ``pip install -e '.[dev]'`` brings, not ``-e .``."""
    import tomllib
    from importlib import metadata

    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = closure(project["dependencies"])
    dev = closure(project["optional-dependencies"]["dev"]) - runtime
    return {
        module
        for module, dists in metadata.packages_distributions().items()
        if all(canonicalize_name(d) in dev for d in dists)
    }


BLOCKED = """
import sys
HIDDEN = set(sys.argv[1].split(","))

class DevExtra:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (only in the dev extra)")
        return None

sys.meta_path.insert(0, DevExtra())
from proxy.cli import main
sys.exit(max(main(["demo", "--format", f, "--turns", "2"]) for f in sys.argv[2:]))
"""


@pytest.mark.slow
def test_the_demo_runs_in_every_format_without_the_dev_extra() -> None:
    """The quick start installs ``-e .`` only: the demo's clients are runtime dependencies (the
    anthropic one was dev-only, and ``demo --format anthropic`` died with ModuleNotFoundError).
    Every module that only the dev extra brings is hidden from a run of each format."""
    hidden = dev_only_modules()
    assert {"agents", "pytest", "respx", "hypothesis"} <= hidden
    assert not {"openai", "anthropic"} & hidden
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, ",".join(sorted(hidden)), "chat", "responses", "anthropic"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("demo upstream window") == 3, done.stdout
