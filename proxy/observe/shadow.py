"""What shadow mode's plans would have done (proxy/edge/shadow.py), counted apart from what the
proxy did: ``contextwarden_shadow_*`` metrics, each team's ``shadow`` figures for
``/admin/stats``, and a ``"shadow": true`` line on the access log per plan.

The figures are the enforced ones' (proxy/observe/metrics.py) for the plan the proxy would
have forwarded: the prompt's tokens as sent and as it would have forwarded them, the estimated
dollars as sent and as it would have forwarded them (strategies/cost.py), and whether that
prompt would have kept its conversation's previous one as its cached prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from proxy.observe.outcome import Outcome

SUMMARIZE = "summarize"  # the action of a plan that summarizes (made, reused or estimated)
REFUSE = "would-refuse"  # the action of a shadow plan that found no way to fit the request


@dataclass(kw_only=True, slots=True)
class ShadowStats:
    requests: int = 0
    would_trim: int = 0
    would_summarize: int = 0
    would_refuse: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_saved: int = 0
    prefix_kept: int = 0
    prefix_broken: int = 0
    cost_as_sent: float = 0.0
    cost_as_forwarded: float = 0.0
    money_saved: float = 0.0
    money_lost_to_cache_breaks: float = 0.0
    # Upstream overflows passed to the client as they came (the enforced path would retry).
    upstream_overflows: int = 0
    plan_errors: int = 0


class ShadowMetrics:
    def __init__(
        self, registry: CollectorRegistry, label: Callable[[str], str], unchanged: frozenset[str]
    ) -> None:
        """``label``: a model's bounded label; ``unchanged``: the actions that change nothing."""
        self._label, self._unchanged = label, unchanged

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(f"contextwarden_shadow_{name}", doc, labels, registry=registry)

        self.requests = counter(
            "requests",
            "Requests forwarded as sent in shadow mode, then planned",
            ("team", "format"),
        )
        self.actions = counter(
            "would_rewrite_requests",
            "Shadow plans that would have changed the request, by action",
            ("team", "action", "format"),
        )
        self.tokens_before = counter(
            "prompt_tokens_before", "Prompt tokens as sent, of the planned requests", ("team",)
        )
        self.tokens_after = counter(
            "prompt_tokens_after", "Prompt tokens the shadow plans would have forwarded", ("team",)
        )
        self.tokens_saved = counter(
            "tokens_saved", "Prompt tokens the shadow plans would have removed", ("team",)
        )
        self.prefixes = counter(
            "prefix",
            "Shadow plans by whether what they would have forwarded kept the conversation's "
            "previous planned prompt as its prefix (kept, broken, new)",
            ("team", "model", "state"),
        )
        self.prompt_cost = counter(
            "prompt_cost_dollars_estimated",
            "Estimated prompt cost with the provider's cache of the planned requests: as sent, "
            "as the shadow plans would have forwarded them, and as those had no cut broken the "
            "cached prefix",
            ("team", "model", "kind"),
        )
        self.overflows = counter(
            "upstream_overflows",
            "Upstream context overflows passed to the client as they came (no retry in shadow "
            "mode)",
            ("team", "format"),
        )
        self.errors = counter(
            "plan_errors",
            "Shadow plans that failed (logged; the client's answer had left already)",
            ("team",),
        )
        self.teams: dict[str, ShadowStats] = {}

    def record(self, o: Outcome, overflowed: bool) -> None:
        """Count the plan ``o`` (its tokens and actions are the plan's, its status the
        upstream's answer to the request as sent)."""
        stats = self.teams.setdefault(o.team, ShadowStats())
        stats.requests += 1
        self.requests.labels(o.team, o.format).inc()
        if overflowed:
            stats.upstream_overflows += 1
            self.overflows.labels(o.team, o.format).inc()
        for action in o.actions:
            if action not in self._unchanged:  # labelled by name: its figures are per request
                self.actions.labels(o.team, action.partition(" ")[0], o.format).inc()
        stats.would_summarize += SUMMARIZE in o.actions
        stats.would_refuse += REFUSE in o.actions
        model = self._label(o.model)
        if o.tokens_before is not None and o.tokens_after is not None:
            saved = max(0, o.tokens_before - o.tokens_after)
            stats.would_trim += saved > 0
            stats.tokens_before += o.tokens_before
            stats.tokens_after += o.tokens_after
            stats.tokens_saved += saved
            self.tokens_before.labels(o.team).inc(o.tokens_before)
            self.tokens_after.labels(o.team).inc(o.tokens_after)
            self.tokens_saved.labels(o.team).inc(saved)
        if o.prefix is not None:
            self.prefixes.labels(o.team, model, o.prefix).inc()
            stats.prefix_kept += o.prefix == "kept"
            stats.prefix_broken += o.prefix == "broken"
        if o.costs is not None:
            for kind, value in (
                ("sent", o.costs.sent),
                ("forwarded", o.costs.forwarded),
                ("unbroken", o.costs.unbroken),
            ):
                self.prompt_cost.labels(o.team, model, kind).inc(max(0.0, value))
            stats.cost_as_sent += o.costs.sent
            stats.cost_as_forwarded += o.costs.forwarded
            stats.money_saved += o.costs.saved
            stats.money_lost_to_cache_breaks += o.costs.lost_to_cache_breaks

    def failed(self, team: str) -> None:
        self.teams.setdefault(team, ShadowStats()).plan_errors += 1
        self.errors.labels(team).inc()

    def team_stats(self, team: str) -> dict[str, Any] | None:
        """A team's shadow figures, with the share of its prompt tokens they would have saved
        (None before any); None for a team with no shadow request."""
        s = self.teams.get(team)
        if s is None:
            return None
        out: dict[str, Any] = {
            k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(s).items()
        }
        share = s.tokens_saved / s.tokens_before if s.tokens_before else None
        out["tokens_saved_share"] = None if share is None else round(share, 4)
        return out
