"""No function in the engine (``strategies/``) or on the request's path (``proxy/request/``)
takes more than ``MOST`` parameters (``self`` and ``cls`` not counted; ``*args`` and
``**kwargs`` count): what belongs together travels as one object (a ``FitRequest``, an
``Attempt``), so that a new mode is a field with a default, not one more positional flag."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("strategies", "proxy/request")
MOST = 5


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names a call of ``node`` may bind, ``self`` and ``cls`` aside."""
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names = [n for n in names if n not in ("self", "cls")]
    if a.vararg is not None:
        names.append(f"*{a.vararg.arg}")
    if a.kwarg is not None:
        names.append(f"**{a.kwarg.arg}")
    return names


def too_long(source: str) -> list[tuple[int, str, int]]:
    """(line, function, parameters) of each function of ``source`` over ``MOST``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            count = len(parameters(node))
            if count > MOST:
                out.append((node.lineno, node.name, count))
    return out


def test_no_function_of_the_engine_or_the_request_path_takes_more_than_five() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} {name} takes {count}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name, count in too_long(path.read_text(encoding="utf-8"))
    ]
    assert not found, "group what belongs together into one object:\n" + "\n".join(found)


def test_the_count_leaves_out_self_and_counts_star_parameters() -> None:
    source = (
        "class C:\n"
        "    def m(self, a, b, c, d, e): ...\n"
        "    async def n(self, a, b, c, d, *, e, f): ...\n"
        "def g(a, b, /, c, *rest, **more): ...\n"
        "def h(a, b, c, d, e, *rest): ...\n"
    )
    assert sorted(too_long(source)) == [(3, "n", 6), (5, "h", 6)]
