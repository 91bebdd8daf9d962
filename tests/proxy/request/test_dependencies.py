"""request/ and overflow/ are handed what they use (the planner, the trimming settings, the
window knowledge, the store), never the whole runtime: no module of theirs imports it, even
for its annotations (proxy/edge/exchange.py composes them)."""

from __future__ import annotations

import ast
from pathlib import Path

PROXY = Path(__file__).resolve().parents[3] / "proxy"


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_module_of_request_or_overflow_is_handed_the_runtime() -> None:
    modules = [*(PROXY / "request").rglob("*.py"), *(PROXY / "overflow").rglob("*.py")]
    assert len(modules) > 10
    handed = [str(p.relative_to(PROXY)) for p in modules if "proxy.runtime" in imported(p)]
    assert not handed, handed
