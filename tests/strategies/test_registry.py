from __future__ import annotations

import pytest

from strategies import registry
from strategies.drop import Drop
from strategies.errors import InvalidConfig
from strategies.truncate_oldest import TruncateOldest


class Halve:
    """A user strategy loaded by import string: keeps the newer half of the block."""

    name = "halve"

    def apply(self, messages, original_tokens, limit, counter):  # type: ignore[no-untyped-def]
        return list(messages[len(messages) // 2 :])


def test_builtins_by_name_with_options() -> None:
    assert isinstance(registry.build("drop", {}), Drop)
    t = registry.build("truncate_oldest", {"unit": "pair", "min_messages": 2})
    assert isinstance(t, TruncateOldest)
    assert (t.unit, t.min_messages) == ("pair", 2)


def test_module_class_strings_load_user_strategies() -> None:
    assert isinstance(registry.build("tests.strategies.test_registry:Halve", {}), Halve)


def test_unknown_names_and_options_fail_clearly() -> None:
    with pytest.raises(InvalidConfig, match="unknown strategy"):
        registry.build("nope", {})
    with pytest.raises(InvalidConfig, match="cannot load"):
        registry.build("no.such.module:X", {})
    with pytest.raises(InvalidConfig, match="keep_pairz"):
        registry.build("truncate_oldest", {"keep_pairz": True})
    with pytest.raises(InvalidConfig, match="summarizer"):
        registry.build("summarize", {})
