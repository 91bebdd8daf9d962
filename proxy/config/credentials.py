"""Where a caller's credential may go: the start-up check of a passthrough configuration.

In ``auth: passthrough`` the proxy reaches an upstream that holds no key of its own with the
caller's credential. That credential goes only where its caller sent it: to the upstream of the
model the caller asked for (``proxy/wire.py``: ``WireRequest.credential_for``). A policy
that sends work elsewhere (its summarizer through another ``upstream``, a fallback model served
by another upstream) must then pay for it with a key of that upstream's own, or it could only
have been paid with the caller's key, at a host the caller never addressed. Such a configuration
is refused at start-up, with what to configure instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Protocol

from proxy.config.catalog import ModelEntry, Upstream
from proxy.config.policies import PolicyConfig
from proxy.providers.registry import provider_of


class _Team(Protocol):
    @property
    def policy(self) -> str | None: ...
    @property
    def allowed_policies(self) -> Sequence[str]: ...


class Settings(Protocol):
    """What the check reads of the settings (proxy/config/settings.py calls it as it loads)."""

    @property
    def auth(self) -> str: ...
    @property
    def default_policy(self) -> str: ...
    @property
    def default_upstream(self) -> str: ...
    @property
    def policies(self) -> Mapping[str, PolicyConfig]: ...
    @property
    def teams(self) -> Mapping[str, _Team]: ...
    @property
    def upstreams(self) -> Mapping[str, Upstream]: ...
    @property
    def models(self) -> Mapping[str, ModelEntry]: ...
    def holds_key(self, upstream: str) -> bool: ...


def misdirected_credentials(settings: Settings) -> list[str]:
    """Each place a passthrough configuration would need a caller's credential at an upstream
    the caller did not address; empty when there is none (or in keys mode)."""
    if settings.auth != "passthrough":
        return []
    problems = []
    for name, policy in settings.policies.items():
        addressed = addressed_under(settings, name)
        summarizer = policy.summarizer
        via = summarizer.upstream
        if (
            policy.summarize
            and summarizer.model
            and via
            and _needs_callers(settings, via, addressed)
        ):
            others = ", ".join(sorted(addressed - {via}))
            problems.append(
                f"policies.{name}.summarizer.upstream {via!r} holds no key of its own, so its "
                f"summaries could only be paid with the key of a caller who addressed {others}: "
                f"give upstream {via!r} an api_key_env, or leave summarizer.model and .upstream "
                "unset to summarize with the request's own model and upstream"
            )
        for model in policy.fallbacks:
            upstream = upstream_of(settings, model)
            if _needs_callers(settings, upstream, addressed):
                others = ", ".join(sorted(addressed - {upstream}))
                problems.append(
                    f"policies.{name}.fallbacks: {model!r} is served by upstream {upstream!r}, "
                    f"which holds no key of its own, so it could only be paid with the key of a "
                    f"caller who addressed {others}: give upstream {upstream!r} an api_key_env, "
                    "or name fallbacks served by the same upstream as the models they stand in for"
                )
    return problems


def _needs_callers(settings: Settings, upstream: str, addressed: set[str]) -> bool:
    """Whether reaching ``upstream`` would take a caller's key that was sent to another."""
    held = settings.holds_key(upstream) or provider_of(settings.upstreams[upstream]).own_credentials
    return not held and bool(addressed - {upstream})


def addressed_under(settings: Settings, policy: str) -> set[str]:
    """The upstreams a request under ``policy`` may have addressed: every one for the default
    policy and for one a team runs under or may choose; else those of the models it is set
    for."""
    chosen = {settings.default_policy}
    for team in settings.teams.values():
        chosen.update(team.allowed_policies)
        if team.policy:
            chosen.add(team.policy)
    if policy in chosen:
        return set(settings.upstreams)
    return {
        entry.upstream or settings.default_upstream
        for entry in settings.models.values()
        if entry.policy == policy
    }


def upstream_of(settings: Settings, model: str) -> str:
    """The upstream that serves ``model``: its entry's (an exact key, else a family pattern),
    else the default upstream."""
    entry = settings.models.get(model)
    if entry is None:
        entry = next((e for k, e in settings.models.items() if fnmatchcase(model, k)), None)
    return (entry.upstream if entry else None) or settings.default_upstream
