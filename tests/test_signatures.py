"""No function in the engine (``strategies/``) or on the request's path (``proxy/request/``)
takes more than ``MOST`` parameters (``self`` and ``cls`` not counted; ``*args`` and
``**kwargs`` count): what belongs together travels as one object (a ``FitRequest``, an
``Attempt``), so that a new mode is a field with a default, not one more positional flag; and
no record of more than three fields is built positionally (``@dataclass(kw_only=True)``)."""

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


def positional_records(source: str) -> list[tuple[int, str, int]]:
    """(line, class, fields) of each dataclass of ``source`` holding more than three fields
    that may be built positionally."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            name = ast.unparse(call.func if call else deco)
            if name.rsplit(".", 1)[-1] != "dataclass":
                continue
            kw_only = call is not None and any(
                k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value
                for k in call.keywords
            )
            fields = [
                s
                for s in node.body
                if isinstance(s, ast.AnnAssign) and "ClassVar" not in ast.unparse(s.annotation)
            ]
            if len(fields) > 3 and not kw_only:
                out.append((node.lineno, node.name, len(fields)))
    return out


def test_a_record_of_more_than_three_fields_is_built_by_keyword() -> None:
    """Two token counts or two floats swapped in a positional construction still type-check."""
    found = [
        f"{path.relative_to(ROOT)}:{line} {name} ({count} fields)"
        for package in ("strategies", "proxy")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name, count in positional_records(path.read_text(encoding="utf-8"))
    ]
    assert not found, "make it @dataclass(kw_only=True):\n" + "\n".join(found)


def test_the_record_check_reads_every_spelling_of_dataclass() -> None:
    source = (
        "@dataclass\nclass A:\n    a: int\n    b: int\n    c: int\n    d: int\n"
        "@dataclasses.dataclass(frozen=True)\nclass B:\n    a: int\n    b: int\n    c: int\n"
        "    d: int\n    e: ClassVar[int] = 0\n"
        "@dataclass(kw_only=True)\nclass C:\n    a: int\n    b: int\n    c: int\n    d: int\n"
        "@dataclass\nclass D:\n    a: int\n    b: int\n    c: int\n"
    )
    assert positional_records(source) == [(2, "A", 4), (8, "B", 4)]
