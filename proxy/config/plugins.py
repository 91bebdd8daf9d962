"""The options of the engine's plug-ins (strategies, passes, prompts) as pydantic models.

Each model is made from the plug-in's own typed constructor, so its defaults are the engine's
and never copied here; ``extra="forbid"`` and strict types make a typo or a wrong type fail
when the config loads, with the key named, never as a 500 on the first request that needs it.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

# Filled in by the engine for each request (see Strategy.bind), never from YAML.
ENGINE_INJECTED = frozenset({"query"})


@functools.cache
def options_model(cls: type[Any]) -> type[BaseModel]:
    """A model of ``cls``'s constructor options. A parameter with no default (a collaborator,
    such as ``summarize``'s summarizer) cannot come from YAML: the plug-in is refused."""
    hints = typing.get_type_hints(cls.__init__)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(cls).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ENGINE_INJECTED:
            continue
        if param.default is param.empty:
            hint = (
                "; for LLM summaries use `summarize: true` (summary checkpoints)"
                if name == "summarizer"
                else ""
            )
            raise ValueError(f"{cls.__name__} needs {name!r}, which a config cannot give{hint}")
        fields[name] = (_lenient_tuple(hints.get(name, Any)), param.default)
    config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
    model: type[BaseModel] = create_model(f"{cls.__name__}Options", __config__=config, **fields)
    return model


def validated(cls: type[Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked against ``cls``'s constructor: what was given, in the types it takes.
    Raises ValueError naming the option."""
    try:
        model = options_model(cls)  # type: ignore[arg-type]  # classes are hashable
        values = model(**options).model_dump(exclude_unset=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']}") from None
    hints = typing.get_type_hints(cls.__init__)
    return {k: _as_declared(v, hints.get(k)) for k, v in values.items()}


def build(cls: type[Any], options: Mapping[str, Any]) -> Any:
    """An instance of ``cls`` from validated options; its own checks become ValueErrors."""
    try:
        return cls(**validated(cls, options))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{cls.__name__}: {exc}") from None


def _lenient_tuple(hint: Any) -> Any:
    # YAML has lists, not tuples: a tuple option takes any sequence of its item type.
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        return Sequence[args[0]] if args else Sequence[Any]  # type: ignore[valid-type]
    return hint


def _as_declared(value: Any, hint: Any) -> Any:
    if typing.get_origin(hint) is tuple and isinstance(value, list):
        return tuple(value)
    return value
