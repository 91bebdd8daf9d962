"""The tree tells the story: proxy/ holds a dozen layers, each package's docstring is the map
of its modules, the pure engine never imports the HTTP side, and one request in any format runs
through one path with no import circle and at most three calls back up the import graph
(``python -m bench.request_path``)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "proxy"
MAX_ROOT = 13  # __init__.py, cli.py and the layers
MAX_CLIMBS = 3


def test_the_proxy_root_is_its_layers() -> None:
    entries = [p for p in PROXY.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= MAX_ROOT, sorted(p.name for p in entries)
    for package in (p for p in entries if p.is_dir()):
        assert (package / "__init__.py").is_file(), package


def test_each_package_docstring_maps_its_modules() -> None:
    for init in PROXY.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for module in init.parent.glob("*.py"):
            if module.name != "__init__.py":
                assert re.search(rf"\b{module.stem}\b", doc), f"{init}: {module.name} unmapped"


def test_the_engine_never_imports_the_http_side() -> None:
    for path in (ROOT / "strategies").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "proxy" or n.startswith("proxy.") for n in names), path


@pytest.mark.slow
def test_one_path_for_every_format_no_circle_few_climbs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.request_path"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "import circles: 0" in out, out
    cases = re.findall(r"^(\w+), .*: \d+ files, (\d+) climbs$", out, re.MULTILINE)
    assert {name for name, _ in cases} >= {"chat", "responses", "messages", "completions"}, out
    assert all(int(climbs) <= MAX_CLIMBS for _, climbs in cases), out
    sections = re.split(r"^(?=\w+, )", out, flags=re.MULTILINE)[1:]
    assert all("    proxy.request.exchange\n" in s for s in sections), out
