"""Policies in YAML: how a request is made to fit, and its translation into the engine's Policy.

A policy may ``extends:`` another; the chain is merged (mappings deeply, anything else replaced)
before validation, so common settings are written once.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from proxy.config import plugins
from proxy.errors import Invariant
from strategies import registry
from strategies.checkpoints.cut import FileTools, Prompts
from strategies.engine import Pass, Policy
from strategies.errors import InvalidConfig
from strategies.rules import TIERS, Match, Rule

ENGINE = Policy()  # the engine's defaults, which the config's defaults are
# The built-in passes whose placeholders name a recall handle under a policy with ``recall``.
HANDLING_PASSES = ("tool_result_microcompact", "content_compact")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _load(ref: str, kind: str) -> type[Any]:
    try:
        return registry.load_class(ref, kind)
    except InvalidConfig as exc:
        raise ValueError(str(exc)) from None


class StrategyRef(_Strict):
    strategy: str = "truncate_oldest"
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known(self) -> StrategyRef:
        self.options = plugins.validated(_load(self.strategy, "strategy"), self.options)
        return self


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

    @field_validator("id")
    @classmethod
    def _not_history(cls, value: str) -> str:
        if value == "history":
            raise ValueError("'history' is the block of whatever no rule takes: use history:")
        return value


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
    max_layers: int = Field(
        4,
        ge=1,
        description="summary layers a checkpoint may stack (each later summary after the ones "
        "before it, which stay as they were: the cached prompt runs through them) before they "
        "are rewritten as one; 1: every new summary rewrites the last",
    )
    read_tools: list[str] = Field(default_factory=lambda: list(FileTools().read))
    write_tools: list[str] = Field(default_factory=lambda: list(FileTools().write))
    shell_tools: list[str] = Field(default_factory=lambda: list(FileTools().shell))
    prompts: dict[str, str] = Field(
        default_factory=dict, description="system, initial, update, layer or turn_prefix overrides"
    )

    @field_validator("prompts")
    @classmethod
    def _prompts(cls, value: dict[str, str]) -> dict[str, str]:
        return plugins.validated(Prompts, value)


class PolicyConfig(_Strict):
    extends: str | None = None
    mode: Literal["enforce", "shadow"] = Field(
        "enforce",
        description="shadow: requests go upstream as sent, what the proxy would have done is "
        "recorded (proxy/edge/shadow.py); a team's own mode comes first",
    )
    pipeline: list[str] = Field(
        default_factory=lambda: [p.name for p in ENGINE.passes],
        description="compaction passes in order: built-in names or module:Class",
    )
    lossless: dict[str, Any] = Field(default_factory=dict)
    content_compact: dict[str, Any] = Field(default_factory=dict)
    tool_result_microcompact: dict[str, Any] = Field(default_factory=dict)
    light_trim: dict[str, Any] = Field(default_factory=dict)
    history: StrategyRef = Field(
        default_factory=lambda: StrategyRef(
            strategy=ENGINE.history_strategy, options=dict(ENGINE.history_options)
        )
    )
    cache_cut_share: float = Field(ENGINE.cache_cut_share, ge=0, lt=1)
    repair_tool_calls: bool = ENGINE.repair_tool_calls
    rules: list[RuleConfig] | None = None
    pin: list[MatchConfig] = Field(
        default_factory=list,
        description="messages kept verbatim: never summarized, dropped or light-trimmed",
    )
    recall: bool = Field(
        False,
        description="cleared or compacted tool outputs can be recalled: each placeholder names "
        "a handle, the originals are kept in the checkpoint store, and the model is offered one "
        "extra tool whose calls the proxy answers itself (the client never sees it)",
    )
    max_recalls: int = Field(
        3, ge=1, le=32, description="recall calls answered per client request, at most"
    )
    standing_rules: float = Field(
        ENGINE.standing_share,
        ge=0,
        lt=1,
        description='user messages that state a standing rule ("from now on ...", "for the '
        'rest of this session ...", "always ...", "never ...") are kept as if pinned, up '
        "to this share of the budget; 0: only pin rules keep them",
    )
    ledger: float = Field(
        ENGINE.ledger_share,
        ge=0,
        lt=1,
        description="a cut that removes messages forwards a ledger of what they established "
        "(the task, the user's rules, decisions with their overrides, facts, open items, files "
        "and errors, quoted without a model), up to this share of the budget; 0: none",
    )
    fallbacks: list[str] = Field(
        default_factory=list,
        description="larger-window models to answer a request that cannot be made to fit its "
        "own (proxy/overflow/fallbacks.py), tried in order",
    )
    fallback_on_loss: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="also fall back when fitting would drop more than this share of the "
        "request's tokens; null: only when it cannot fit",
    )
    lower_max_tokens: bool = Field(
        True,
        description="a reply limit that does not fit beside the prompt is lowered to what is "
        "left (down to min_output_tokens) instead of the prompt being cut for it",
    )
    min_output_tokens: int = Field(
        4096, gt=0, description="lower_max_tokens never goes below this; under it, trimming"
    )
    summarize: bool = True
    summary_role: Literal["user", "developer", "system"] = Field(
        "user", description="role of the summary message; user text never gains authority"
    )
    summarizer: SummarizerConfig = Field(default_factory=SummarizerConfig)
    stateful: Literal["passthrough", "truncation_auto"] = Field(
        "passthrough",
        description="Responses with previous_response_id or conversation (history the proxy "
        "cannot see): forward as sent, or ask the server to truncate (truncation: auto)",
    )
    completions: Literal["middle_out", "keep_tail", "reject"] = Field(
        "middle_out", description="/v1/completions: how a prompt over the budget is cut"
    )
    _policy: Policy = PrivateAttr(default=ENGINE)

    @field_validator("pipeline")
    @classmethod
    def _passes_exist(cls, value: list[str]) -> list[str]:
        for name in value:
            _load(name, "pass")
        return value

    @field_validator("lossless", "content_compact", "tool_result_microcompact", "light_trim")
    @classmethod
    def _pass_options(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if info.field_name is None:
            raise Invariant("a pass's options validated without the field's name")
        return plugins.validated(_load(info.field_name, "pass"), value)

    @model_validator(mode="after")
    def _build(self) -> PolicyConfig:
        """The engine's Policy, built once, here: what the config accepted is what runs."""
        passes: list[Pass] = []
        for name in self.pipeline:
            options = getattr(self, name, None) if name in registry.PASSES else None
            if self.recall and name in HANDLING_PASSES:
                options = {"handles": True, **(options or {})}
            try:
                built = plugins.build(_load(name, "pass"), options or {})
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            if not callable(getattr(built, "apply", None)):
                raise ValueError(f"pass {name!r} has no apply method")
            passes.append(built)
        self._policy = Policy(
            rules=self._rules(),
            history_strategy=self.history.strategy,
            history_options=dict(self.history.options),
            passes=tuple(passes),
            repair_tool_calls=self.repair_tool_calls,
            cache_cut_share=self.cache_cut_share,
            pins=tuple(_match(m) for m in self.pin),
            standing_share=self.standing_rules,
            ledger_share=self.ledger,
            recall=self.recall,
        )
        for rule in (*self._policy.rules, self._policy.history):
            self._policy.strategy(rule)  # a strategy that cannot be built fails now
        return self

    def to_policy(self) -> Policy:
        return self._policy

    def _rules(self) -> tuple[Rule, ...]:
        """The system prompt's rule first (unless the policy redefines ``system``), then the
        policy's own rules, then the other defaults (leading, current) it did not redefine: a
        rule for leading messages takes the ones after the system prompt."""
        own = tuple(_rule(r) for r in self.rules or [])
        ids = {r.id for r in own}
        defaults = [r for r in Policy().rules if r.id not in ids]
        first = tuple(r for r in defaults if r.id == "system")
        return first + own + tuple(r for r in defaults if r.id != "system")

    def file_tools(self) -> FileTools:
        s = self.summarizer
        return FileTools(tuple(s.read_tools), tuple(s.write_tools), tuple(s.shell_tools))

    def prompts(self) -> Prompts:
        return Prompts(**self.summarizer.prompts)


def _match(m: MatchConfig) -> Match:
    roles = (m.role,) if isinstance(m.role, str) else tuple(m.role or ())
    return Match(
        roles=roles, name=m.name, position=m.position, last=m.last, content_regex=m.content_regex
    )


def _rule(r: RuleConfig) -> Rule:
    match = _match(r.match)
    tier = TIERS[r.tier] if isinstance(r.tier, str) else r.tier
    fmt = ("xml" if r.inject_into_system is True else r.inject_into_system) or None
    return Rule(
        id=r.id,
        match=match,
        tier=tier,
        strategy=r.strategy,
        options=dict(r.options),
        max_tokens=r.max_tokens,
        inject_into_system=fmt,
    )


def resolve_extends(policies: dict[str, Any]) -> dict[str, Any]:
    """Raw policy mappings with every ``extends:`` chain merged in (parents first). ``default``
    may be extended without being declared: it is the built-in default then."""
    out: dict[str, Any] = {}

    def resolve(name: str, seen: tuple[str, ...]) -> dict[str, Any]:
        if name in seen:
            raise ValueError(f"policies: extends cycle {' -> '.join((*seen, name))}")
        if name not in policies and name != "default":
            raise ValueError(f"policies.{seen[-1]}.extends: no policy named {name!r}")
        raw = policies.get(name) or {}  # the built-in default, when the file does not say it
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
