"""No unreachable code: vulture, at the confidence and on the paths ``[tool.vulture]`` in
pyproject.toml names (80%), finds nothing that a ``# vulture: <why>`` comment on the flagged line
does not justify; and no such comment outlives its finding."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import vulture

ROOT = Path(__file__).resolve().parent.parent
MARK = re.compile(r"#\s*vulture:\s*(.*)$")


def config() -> tuple[list[str], int]:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["vulture"]
    return table["paths"], table["min_confidence"]


def findings(paths: list[str], confidence: int) -> list[tuple[Path, int, str]]:
    scan = vulture.Vulture()
    scan.scavenge([str(ROOT / p) for p in paths])
    return [
        (Path(item.filename).resolve(), item.first_lineno, item.message)
        for item in scan.get_unused_code(min_confidence=confidence)
    ]


def reason(path: Path, line: int) -> str | None:
    """The justification on ``path``'s ``line``, when it carries one with words in it."""
    found = MARK.search(path.read_text().splitlines()[line - 1])
    return (found.group(1).strip() or None) if found else None


def test_vulture_finds_nothing_unjustified() -> None:
    paths, confidence = config()
    assert confidence <= 80, "the issue's bar is 80% confidence at most"
    unjustified = [
        f"{path.relative_to(ROOT)}:{line}: {message}"
        for path, line, message in findings(paths, confidence)
        if reason(path, line) is None
    ]
    assert not unjustified, (
        "unused code (remove it, or say on its line why it stays: `# vulture: <why>`):\n"
        + "\n".join(unjustified)
    )


def test_every_justification_answers_a_finding() -> None:
    paths, confidence = config()
    flagged = {(path, line) for path, line, _ in findings(paths, confidence)}
    stale = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in paths
        for path in sorted((ROOT / top).rglob("*.py"))
        for n, text in enumerate(path.read_text().splitlines(), 1)
        if MARK.search(text) and (path.resolve(), n) not in flagged
    ]
    assert not stale, "a `# vulture:` comment on a line vulture no longer flags:\n" + "\n".join(
        stale
    )


def test_the_check_sees_unused_code(tmp_path: Path) -> None:
    """The scan itself works: an unused import is found at the configured confidence."""
    (tmp_path / "module.py").write_text(
        "import os\n\n\ndef used() -> None:\n    return None\n\n\nused()\n"
    )
    _, confidence = config()
    scan = vulture.Vulture()
    scan.scavenge([str(tmp_path)])
    assert [i.message for i in scan.get_unused_code(min_confidence=confidence)] == [
        "unused import 'os'"
    ]
