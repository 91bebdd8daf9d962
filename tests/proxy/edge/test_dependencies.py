"""edge/ is handed the runtime only at the entries the routes call (proxy/app.py): each unpacks
it once into what its stages use (the transports, the settings, the models, the admission, the
owners, the metrics...), so no function below an entry reaches every layer, and no record of
edge/ holds the whole runtime under another name."""

from __future__ import annotations

import ast
from pathlib import Path

EDGE = Path(__file__).resolve().parents[3] / "proxy" / "edge"

# (module, function): the routes' entries, which may take the runtime.
ENTRIES = {
    ("exchange.py", "handle"),  # the request path, below traced.fitted
    ("traced.py", "fitted"),  # the four formats' routes, and each WebSocket turn
    ("passthrough.py", "handle_passthrough"),
    ("passthrough.py", "handle_models"),
}


def names_runtime(annotation: ast.expr | None) -> bool:
    """Whether an annotation names ``Runtime`` (a name, an attribute, or a string)."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Runtime":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Runtime":
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and names_runtime(ast.parse(node.value, mode="eval").body)
        ):
            return True
    return False


def taking_the_runtime(edge: Path) -> set[tuple[str, str]]:
    """Every function (nested ones and methods too) with a parameter annotated ``Runtime``."""
    found = set()
    for path in sorted(edge.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            if any(p is not None and names_runtime(p.annotation) for p in params):
                found.add((path.name, node.name))
    return found


def holding_the_runtime(edge: Path) -> set[tuple[str, str]]:
    """Every class of edge/ with a field annotated ``Runtime`` (a runtime renamed)."""
    found = set()
    for path in sorted(edge.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and names_runtime(item.annotation):
                        found.add((path.name, node.name))
    return found


def test_only_the_entries_take_the_runtime() -> None:
    taking = taking_the_runtime(EDGE)
    assert taking - ENTRIES == set(), "unpack the runtime at the entry; pass what is used"
    assert taking == ENTRIES, "an entry renamed or gone: update ENTRIES"


def test_no_record_of_edge_holds_the_runtime() -> None:
    assert holding_the_runtime(EDGE) == set()


def test_the_walk_sees_every_spelling(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def a(rt: Runtime): ...\n"
        "async def b(x: int, *, rt: 'proxy.runtime.Runtime | None' = None): ...\n"
        "def c(rt: runtime.Runtime): ...\n"
        "def d(settings: Settings, runtime_like: int): ...\n"
        "class E:\n    rt: Runtime\n    def f(self, *rts: Runtime): ...\n"
    )
    assert taking_the_runtime(tmp_path) == {("m.py", n) for n in "abcf"}
    assert holding_the_runtime(tmp_path) == {("m.py", "E")}
