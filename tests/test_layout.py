"""The tree tells the story: proxy/ holds its kernel at the root and a dozen layers, each package's
docstring is the map of its modules, imports go one way down the README's table of layers, the
pure engine never imports the HTTP side, and one request in any format runs
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
MAX_ROOT = 22  # __init__.py, the kernel's and the composition's modules, and the layers
MAX_CLIMBS = 3


def test_the_proxy_root_is_its_kernel_and_layers() -> None:
    entries = [p for p in PROXY.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= MAX_ROOT, sorted(p.name for p in entries)
    for package in (p for p in entries if p.is_dir()):
        assert (package / "__init__.py").is_file(), package


def test_each_package_docstring_maps_its_modules() -> None:
    """Every package's, nested ones too (``request/planning/``); a layer's names its
    subpackages (the root's layers are the README's table)."""
    for init in PROXY.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        inside = [*init.parent.glob("*.py")]
        if init.parent != PROXY:
            inside += init.parent.glob("*/__init__.py")
        for module in (m for m in inside if m != init):
            name = module.parent.name if module.name == "__init__.py" else module.stem
            assert re.search(rf"\b{name}\b", doc), f"{init}: {name} unmapped"


def layers() -> list[set[str]]:
    """The README's table of layers, top first: each row's names."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| layer (top first) | what it is |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    return [set(re.findall(r"`(\w+)`", row.split("|")[1])) for row in rows]


def node(module: str) -> str | None:
    """The layer of a ``proxy.*`` module: its package, or the root module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "proxy" else None


def imports(tree: ast.Module) -> list[tuple[str, bool]]:
    """Every absolute import in a module, wherever it sits, and whether it runs (one under
    ``if TYPE_CHECKING:`` names types for annotations and never runs)."""
    typing_only: set[int] = set()
    for n in ast.walk(tree):
        test = n.test if isinstance(n, ast.If) else None
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            typing_only |= {id(x) for b in n.body for x in ast.walk(b)}  # type: ignore[union-attr]
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and not n.level:
            found.append((n.module, id(n) not in typing_only))
        elif isinstance(n, ast.Import):
            found.extend((a.name, id(n) not in typing_only) for a in n.names)
    return found


def test_imports_go_one_way_down_the_readme_table() -> None:
    order = layers()
    rank = {name: i for i, row in enumerate(order) for name in row}
    present = {p.stem for p in PROXY.glob("*.py")} | {p.name for p in PROXY.iterdir() if p.is_dir()}
    present -= {"__init__", "__pycache__"}
    assert present == set(rank), ("the README's table and proxy/ differ", present ^ set(rank))
    upward = []
    for path in PROXY.rglob("*.py"):
        rel = path.relative_to(PROXY).parts
        here = rel[0] if len(rel) > 1 else path.stem
        if here == "__init__":
            continue
        for module, runs in imports(ast.parse(path.read_text())):
            there = node(module)
            if there is None or there == here or there not in rank:
                continue
            if rank[there] > rank[here]:
                continue  # down the table
            if not runs and module == "proxy.runtime":
                continue  # the composition root's type, named for annotations only
            upward.append(f"{path.relative_to(ROOT)} ({here}) imports {module} ({there})")
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_upward_import() -> None:
    """The check above is not vacuous: an upward import in a module is found."""
    tree = ast.parse(
        "from proxy.edge.auth import Principal\nif TYPE_CHECKING:\n    import proxy.runtime\n"
    )
    assert imports(tree) == [("proxy.edge.auth", True), ("proxy.runtime", False)]
    order = layers()
    rank = {name: i for i, row in enumerate(order) for name in row}
    assert rank["errors"] > rank["formats"] > rank["request"] > rank["edge"] > rank["app"]


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
    assert all("    proxy.edge.exchange\n" in s for s in sections), out


def test_the_tests_mirror_the_packages() -> None:
    """A package's tests are under tests/ at its path: tests/proxy/<layer>/ for proxy/'s
    layers, none left flat beside them."""
    for tests, source in (
        (ROOT / "tests" / "proxy", PROXY),
        (ROOT / "tests" / "strategies", ROOT / "strategies"),
    ):
        for folder in (p.parent for p in tests.rglob("__init__.py") if p.parent != tests):
            package = source / folder.relative_to(tests)
            assert (package / "__init__.py").is_file(), f"{folder}: no such package"
    assert not list((ROOT / "tests" / "proxy").glob("test_*.py")), "tests/proxy/ holds layers only"


# The request path's core: a change to one of their modules is checked in seconds by its own
# unit tests, not only by the end-to-end ones (#57).
UNIT_TESTED = ("edge", "overflow", "request/planning")


def test_every_module_of_the_request_paths_core_has_a_test_file_of_its_own() -> None:
    """Each module of proxy/edge/, proxy/overflow/ and proxy/request/planning/ has
    tests/proxy/<the same path>/test_<module>.py, holding tests."""
    missing = []
    for package in UNIT_TESTED:
        modules = [m for m in (PROXY / package).glob("*.py") if m.name != "__init__.py"]
        assert modules, f"proxy/{package}/ holds no modules: UNIT_TESTED is stale"
        for module in modules:
            tests = ROOT / "tests" / "proxy" / package / f"test_{module.stem}.py"
            if not tests.is_file() or not re.search(
                r"^(async )?def test_", tests.read_text(), re.M
            ):
                missing.append(str(tests.relative_to(ROOT)))
    assert not missing, f"modules without a test file of their own: {sorted(missing)}"


def test_every_module_the_readme_names_exists() -> None:
    """The README's map and tables name files that are there: a path as written, a bare
    ``name.py`` somewhere in the tree (a renamed module leaves no stale name behind)."""
    readme = (ROOT / "README.md").read_text()
    present = {p.name for p in ROOT.glob("**/*.py") if ".venv" not in p.parts}
    missing = []
    for name in sorted(set(re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b", readme))):
        found = (ROOT / name).is_file() if "/" in name else name in present
        if not found:
            missing.append(name)
    assert not missing, missing
