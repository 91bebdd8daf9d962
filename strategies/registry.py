"""Strategies by name. Built-ins are registered exactly as a user's own would be: a name maps to
a ``module:Class`` import string, and any such string in YAML works as a name too. Options are
passed to the class as keyword arguments: ``build`` refuses one the class does not take with an
``InvalidConfig`` that names it (the config's loader checks them earlier, the same way).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from strategies.base import Strategy
from strategies.errors import InvalidConfig

BUILTIN: dict[str, str] = {
    "strict": "strategies.strict:Strict",
    "drop": "strategies.drop:Drop",
    "truncate_oldest": "strategies.truncate_oldest:TruncateOldest",
    "middle_out": "strategies.middle_out:MiddleOut",
    "summarize": "strategies.summarize:Summarize",
    "relevance_drop": "strategies.relevance_drop:RelevanceDrop",
}
# Compaction passes, by name, the same way: built-ins and ``module:Class`` alike.
PASSES: dict[str, str] = {
    "lossless": "strategies.lossless:Lossless",
    "content_compact": "strategies.content_compact:ContentCompact",
    "tool_result_microcompact": "strategies.microcompact:ToolResultMicrocompact",
    "reattached_clear": "strategies.attached:ReattachedClear",
    "light_trim": "strategies.light_trim:LightTrim",
}


@functools.cache
def load_class(ref: str, kind: str = "strategy") -> type[Any]:
    """The class a name (or ``module:Class`` string) stands for; ``kind``: strategy or pass."""
    names = PASSES if kind == "pass" else BUILTIN
    target = names.get(ref, ref)
    module_name, _, attr = target.partition(":")
    if not attr:
        raise InvalidConfig(f"unknown {kind} {ref!r}: use one of {sorted(names)} or module:Class")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidConfig(f"cannot load {kind} {ref!r}: {exc}") from None
    if not isinstance(cls, type):
        raise InvalidConfig(f"{kind} {ref!r} is not a class")
    return cls


def build(ref: str, options: Mapping[str, Any], **injected: Any) -> Strategy:
    """An instance of strategy ``ref``; ``injected`` supplies collaborators it asks for by name."""
    cls = load_class(ref)
    params = inspect.signature(cls).parameters
    extra = {k: v for k, v in injected.items() if k in params}
    try:
        instance: Strategy = cls(**options, **extra)
    except TypeError as exc:
        raise InvalidConfig(f"strategy {ref!r}: {exc}") from None
    return instance
