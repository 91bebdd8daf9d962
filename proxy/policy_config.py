"""Policies in YAML: how a request is made to fit, and its translation into the engine's Policy.

A policy may ``extends:`` another; the chain is merged (mappings deeply, anything else replaced)
before validation, so common settings are written once.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from strategies import registry
from strategies.engine import Pass, Policy
from strategies.errors import InvalidConfig
from strategies.light_trim import LightTrim
from strategies.microcompact import PLACEHOLDER, ToolResultMicrocompact
from strategies.rules import TIERS, Match, Rule
from strategies.summary import (
    INITIAL_PROMPT,
    SYSTEM_PROMPT,
    TURN_PREFIX_PROMPT,
    UPDATE_PROMPT,
    FileTools,
    Prompts,
)

PassName = Literal["tool_result_microcompact", "light_trim"]
DEFAULT_PIPELINE: list[PassName] = ["tool_result_microcompact", "light_trim"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MicrocompactConfig(_Strict):
    keep_recent: int = Field(5, ge=0)
    include_tools: list[str] = Field(default_factory=list)
    exclude_tools: list[str] = Field(default_factory=list)
    min_result_tokens: int = Field(0, ge=0)
    placeholder: str = PLACEHOLDER


class LightTrimConfig(_Strict):
    keep_recent: int = Field(4, ge=0)
    text_threshold: int = Field(4000, gt=0)
    preserve_head: int = Field(1200, ge=0)
    preserve_tail: int = Field(800, ge=0)


class StrategyRef(_Strict):
    strategy: str = "truncate_oldest"
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known(self) -> StrategyRef:
        try:
            registry.check_options(self.strategy, self.options)
        except InvalidConfig as exc:
            raise ValueError(str(exc)) from None
        self.options = options_model(self.strategy)(**self.options).model_dump(exclude_unset=True)
        return self


# Filled in by the engine for every request (the user's current message), never from YAML.
ENGINE_INJECTED = frozenset({"query"})


@functools.cache
def options_model(ref: str) -> type[BaseModel]:
    """A pydantic model of a strategy's options, from its constructor's typed signature
    (``extra="forbid"``), so that a wrong type fails when the config loads, never as a 500 on
    the first request that needs the strategy. A parameter with no default and no place in
    YAML (a collaborator such as ``summarize``'s summarizer) makes the strategy unusable from
    config, and says so."""
    cls = registry.load_class(ref)
    hints = typing.get_type_hints(cls.__init__)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(cls).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ENGINE_INJECTED:
            continue
        if param.default is param.empty:
            raise ValueError(
                f"strategy {ref!r} needs {name!r}, which a config cannot give"
                + (
                    "; for LLM summaries use `summarize: true` (summary checkpoints)"
                    if name == "summarizer"
                    else ""
                )
            )
        fields[name] = (hints.get(name, Any), param.default)
    config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
    model: type[BaseModel] = create_model(f"{cls.__name__}Options", __config__=config, **fields)
    return model


class MatchConfig(_Strict):
    role: str | list[str] | None = None
    name: str | None = None
    position: Literal["any", "first", "leading", "current", "history"] = "any"
    last: int = Field(0, ge=0)
    content_regex: str | None = None

    @field_validator("content_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return value


class RuleConfig(StrategyRef):
    id: str
    match: MatchConfig = Field(default_factory=MatchConfig)
    tier: int | Literal["system", "core", "rag", "history", "scratchpad"] = "history"
    strategy: str = "strict"
    max_tokens: int = Field(0, ge=0)
    inject_into_system: bool | Literal["xml", "markdown"] = False


class PromptsConfig(_Strict):
    system: str = SYSTEM_PROMPT
    initial: str = INITIAL_PROMPT
    update: str = UPDATE_PROMPT
    turn_prefix: str = TURN_PREFIX_PROMPT


class SummarizerConfig(_Strict):
    model: str | None = Field(
        None, description="litellm model string; default: the request's own model and upstream"
    )
    upstream: str | None = Field(None, description="reach `model` through this upstream")
    context_window: int | None = Field(
        None, gt=0, description="the summarizer model's window; default: the request's window"
    )
    timeout: float = Field(30.0, gt=0, description="one summarizer call")
    deadline_seconds: float = Field(
        30.0, gt=0, description="all the summarizer calls one request may wait for"
    )
    max_calls_per_request: int = Field(
        4, gt=0, description="summarizer calls one checkpoint may take; then truncation"
    )
    max_tokens: int | None = Field(None, gt=0)
    keep_recent_tokens: int | None = Field(None, gt=0)
    soft_threshold: float = Field(0.75, gt=0, le=1)
    summarize_unseen: bool = Field(
        False,
        description="summarize a conversation on its first request (a one-off pays for nothing)",
    )
    breaker_failures: int = Field(3, gt=0)
    read_tools: list[str] = Field(default_factory=lambda: list(FileTools().read))
    write_tools: list[str] = Field(default_factory=lambda: list(FileTools().write))
    prompts: PromptsConfig = Field(default_factory=PromptsConfig)


class PolicyConfig(_Strict):
    extends: str | None = None
    pipeline: list[PassName] = Field(default_factory=lambda: list(DEFAULT_PIPELINE))
    tool_result_microcompact: MicrocompactConfig = Field(default_factory=MicrocompactConfig)
    light_trim: LightTrimConfig = Field(default_factory=LightTrimConfig)
    history: StrategyRef = Field(
        default_factory=lambda: StrategyRef(strategy="truncate_oldest", options={"unit": "turn"})
    )
    cache_cut_share: float = Field(0.3, ge=0, lt=1)
    repair_tool_calls: bool = False
    rules: list[RuleConfig] | None = None
    summarize: bool = True
    summary_role: Literal["user", "developer", "system"] = Field(
        "user", description="role of the summary message; user text never gains authority"
    )
    summarizer: SummarizerConfig = Field(default_factory=SummarizerConfig)

    def to_policy(self) -> Policy:
        passes: list[Pass] = []
        for name in self.pipeline:
            if name == "tool_result_microcompact":
                mc = self.tool_result_microcompact
                passes.append(
                    ToolResultMicrocompact(
                        mc.keep_recent,
                        tuple(mc.include_tools),
                        tuple(mc.exclude_tools),
                        mc.min_result_tokens,
                        mc.placeholder,
                    )
                )
            else:
                passes.append(LightTrim(**self.light_trim.model_dump()))
        rules = self._rules()
        return Policy(
            rules=rules,
            history_strategy=self.history.strategy,
            history_options=dict(self.history.options),
            passes=tuple(passes),
            repair_tool_calls=self.repair_tool_calls,
            cache_cut_share=self.cache_cut_share,
        )

    def _rules(self) -> tuple[Rule, ...]:
        """The policy's own rules first, then the defaults (system, current) it did not redefine."""
        own = tuple(_rule(r) for r in self.rules or [])
        ids = {r.id for r in own}
        return own + tuple(r for r in Policy().rules if r.id not in ids)

    def file_tools(self) -> FileTools:
        return FileTools(tuple(self.summarizer.read_tools), tuple(self.summarizer.write_tools))

    def prompts(self) -> Prompts:
        return Prompts(**self.summarizer.prompts.model_dump())


def _rule(r: RuleConfig) -> Rule:
    roles = (r.match.role,) if isinstance(r.match.role, str) else tuple(r.match.role or ())
    match = Match(roles, r.match.name, r.match.position, r.match.last, r.match.content_regex)
    tier = TIERS[r.tier] if isinstance(r.tier, str) else r.tier
    fmt = ("xml" if r.inject_into_system is True else r.inject_into_system) or None
    return Rule(r.id, match, tier, r.strategy, dict(r.options), r.max_tokens, fmt)


def resolve_extends(policies: dict[str, Any]) -> dict[str, Any]:
    """Raw policy mappings with every ``extends:`` chain merged in (parents first)."""
    out: dict[str, Any] = {}

    def resolve(name: str, seen: tuple[str, ...]) -> dict[str, Any]:
        if name in seen:
            raise ValueError(f"policies: extends cycle {' -> '.join((*seen, name))}")
        if name not in policies:
            raise ValueError(f"policies.{seen[-1]}.extends: no policy named {name!r}")
        raw = policies[name] or {}
        if not isinstance(raw, dict):
            raise ValueError(f"policies.{name} must be a mapping")
        parent = raw.get("extends")
        base = resolve(parent, (*seen, name)) if isinstance(parent, str) else {}
        return _merge(base, raw)

    for name in policies:
        out[name] = resolve(name, ())
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    # A different strategy brings its own options: nothing of the parent's strategy is inherited.
    if "strategy" in over and over.get("strategy") != base.get("strategy"):
        return dict(over)
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
