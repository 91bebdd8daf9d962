"""Model families: a ``models:`` key with a wildcard (``claude-*``, ``gpt-6*``, ``gpt-5.?-luna``)
names every model it matches, so an operator declares a window and an upstream once for the
names clients invent faster than any table learns them (Claude Code asked for
``claude-opus-4-8``, Codex for ``gpt-6.1-sol``).

An exact key wins over a pattern; among patterns the most specific one (the most characters
that are not wildcards) wins, then the first in the file. Matching is ``fnmatch``'s, case
sensitive: ``*`` any run of characters, ``?`` one, ``[...]`` one of a set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Generic, TypeVar

WILDCARDS = frozenset("*?[")
Entry = TypeVar("Entry")


def is_pattern(key: str) -> bool:
    return any(c in WILDCARDS for c in key)


def _specificity(pattern: str) -> int:
    return sum(1 for c in pattern if c not in WILDCARDS)


class Families(Generic[Entry]):
    """The ``models:`` entries, looked up by a model's name."""

    def __init__(self, entries: Mapping[str, Entry]) -> None:
        self.exact = {k: v for k, v in entries.items() if not is_pattern(k)}
        patterns = [(k, v) for k, v in entries.items() if is_pattern(k)]
        # sorted() is stable: equally specific patterns keep the file's order.
        self.patterns = sorted(patterns, key=lambda kv: -_specificity(kv[0]))

    def find(self, name: str) -> tuple[str, Entry] | None:
        """(the key that names ``name``, its entry), or None."""
        entry = self.exact.get(name)
        if entry is not None:
            return name, entry
        for pattern, found in self.patterns:
            if fnmatchcase(name, pattern):
                return pattern, found
        return None

    def key(self, name: str) -> str | None:
        found = self.find(name)
        return None if found is None else found[0]

    def matched(self, pattern: str, names: Iterable[str]) -> list[str]:
        """Of ``names``, those that ``pattern`` is the entry for (no exact key, no more
        specific pattern takes them)."""
        return [n for n in names if self.key(n) == pattern]


def describe(entries: Mapping[str, object], known: Iterable[str], shown: int = 4) -> list[str]:
    """One line per family pattern: which of the ``known`` model names (litellm's table) it
    takes, so an operator sees a pattern that reaches further than meant."""
    families = Families(entries)
    names = list(known)
    lines = []
    for pattern, _ in families.patterns:
        matched = families.matched(pattern, names)
        sample = ", ".join(matched[:shown]) + (", ..." if len(matched) > shown else "")
        table = f"{len(matched)} ({sample})" if matched else "none"
        lines.append(f"  {pattern}: every name it matches; of litellm's table: {table}")
    return lines
