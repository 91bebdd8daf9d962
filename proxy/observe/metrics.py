"""Every request's ``Outcome``, recorded once: Prometheus metrics (one registry per app, no
globals), per-team stats for the admin API, and one structured JSON line on the
``contextwarden.access`` logger (never a key or an Authorization header; message content only
with ``log_content: true``).

Every label value comes from a bounded set, so no client can grow ``/metrics`` without limit:
teams and policies are configured, statuses are three digits, and a model is labelled by name
only when the config lists it (any other name is ``other``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.observe.outcome import Outcome
from proxy.observe.shadow import ShadowMetrics
from proxy.stores.quota import Usage
from proxy.windows.families import Families

log = logging.getLogger("contextwarden.access")
TOKEN_BUCKETS = (256, 1024, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 1048576)
DRIFT_BUCKETS = (0.5, 0.8, 0.9, 0.95, 0.98, 1.0, 1.02, 1.05, 1.1, 1.2, 1.5, 2.0)
# "shadow": a request forwarded as sent in shadow mode (its plan is counted apart: shadow.py).
UNCHANGED = frozenset({"unknown-window", "trimming-disabled", "not-fitted", "shadow"})
FALLBACK = "plan-fallback"  # the action of a plan replaced by the safe plan: "plan-fallback <why>"
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass(kw_only=True, slots=True)
class TeamStats:
    requests: int = 0
    rewritten: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_saved: int = 0
    overflow_retries: int = 0
    summaries_created: int = 0
    summaries_reused: int = 0
    unfitted: int = 0
    # Plans that broke the post-condition and were replaced by the safe plan (should stay 0).
    plan_fallbacks: int = 0
    prefix_kept: int = 0
    prefix_broken: int = 0
    # Of the trimmed requests (fewer tokens forwarded than sent) of a conversation seen before:
    # kept / (kept + broken) is the share that kept the provider's cached prefix.
    trimmed_prefix_kept: int = 0
    trimmed_prefix_broken: int = 0
    cached_tokens_estimated: int = 0
    # Estimated prompt dollars (strategies/cost.py), for models with prices.
    cost_as_sent: float = 0.0
    cost_as_forwarded: float = 0.0
    money_saved: float = 0.0
    money_lost_to_cache_breaks: float = 0.0


class Metrics:
    def __init__(self, models: Iterable[str] = ()) -> None:
        self._models = Families(dict.fromkeys(models, True))
        self.registry = CollectorRegistry()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.requests = self._counter(
            "contextwarden_requests",
            "Fitted requests, by wire format",
            ("team", "model", "status", "format"),
        )
        self.rewritten = self._counter(
            "contextwarden_rewritten_requests",
            "Requests changed, by action",
            ("team", "action", "format"),
        )
        self.tokens_before = self._histogram(
            "contextwarden_prompt_tokens_before",
            "Prompt tokens as sent by the client",
            ("team",),
            TOKEN_BUCKETS,
        )
        self.tokens_after = self._histogram(
            "contextwarden_prompt_tokens_after",
            "Prompt tokens as forwarded",
            ("team",),
            TOKEN_BUCKETS,
        )
        self.tokens_saved = self._counter(
            "contextwarden_tokens_saved", "Prompt tokens removed before forwarding", ("team",)
        )
        self.overflow_retries = self._counter(
            "contextwarden_overflow_retries",
            "Retries after an upstream context overflow",
            ("team", "outcome", "format"),
        )
        self.summarizer_latency = self._histogram(
            "contextwarden_summarizer_latency_seconds", "Time to make a checkpoint", (), SECONDS
        )
        self.checkpoints = self._counter(
            "contextwarden_checkpoints", "Checkpoint look-ups and writes", ("team", "event")
        )
        self.upstream_latency = self._histogram(
            "contextwarden_upstream_latency_seconds",
            "Upstream time to response headers",
            ("model",),
            SECONDS,
        )
        self.overhead = self._histogram(
            "contextwarden_proxy_overhead_seconds",
            "Time spent in the proxy, upstream excluded",
            (),
            SECONDS,
        )
        self.usage_drift = self._histogram(
            "contextwarden_usage_drift_ratio",
            "The upstream's usage.prompt_tokens over the proxy's count of what it forwarded",
            ("model",),
            DRIFT_BUCKETS,
        )
        self.window_stops = self._counter(
            "contextwarden_context_window_stops",
            "Answers that stopped at the model's context window (stop_reason "
            "model_context_window_exceeded), left alone",
            ("team", "model"),
        )
        self.truncations = self._counter(
            "contextwarden_upstream_truncations",
            "Answers whose usage showed the upstream read fewer prompt tokens than were sent "
            "(it truncated the prompt silently, as Ollama does at num_ctx): the window was learned",
            ("team", "model"),
        )
        self.prefixes = self._counter(
            "contextwarden_prefix",
            "Fitted requests by whether they kept the conversation's previous prompt as their "
            "prefix (kept, broken, new)",
            ("team", "model", "state"),
        )
        self.trimmed_prefixes = self._counter(
            "contextwarden_trimmed_prefix",
            "Trimmed requests of a conversation seen before, by whether they kept its previous "
            "prompt as their prefix (kept, broken): kept over the sum is the cache-hit share",
            ("team", "model", "state"),
        )
        self.cached_tokens = self._counter(
            "contextwarden_cached_prompt_tokens_estimated",
            "Prompt tokens the provider can serve from its cache: the previous prompt of each "
            "request that kept it as its prefix",
            ("team", "model"),
        )
        self.prompt_cost = self._counter(
            "contextwarden_prompt_cost_dollars_estimated",
            "Estimated prompt cost with the provider's cache: as the client sent it (untrimmed), "
            "as forwarded, and as forwarded had no cut broken the cached prefix",
            ("team", "model", "kind"),
        )
        self.unfitted = self._counter(
            "contextwarden_unfitted_requests",
            "Requests forwarded untouched on a path the proxy does not fit",
            ("team", "path"),
        )
        self.plan_fallbacks = self._counter(
            "contextwarden_plan_fallbacks",
            "Plans that broke the post-condition (proxy/request/planning/postcondition.py) and "
            "were replaced by the safe plan, by the promise they broke; a bug when not 0",
            ("team", "reason"),
        )
        self.teams: dict[str, TeamStats] = {}
        self.shadow = ShadowMetrics(self.registry, self.model_label, UNCHANGED)
        # Told every Outcome too, with its model label: OpenTelemetry's (proxy/observe/otel.py).
        self.also: Callable[[Outcome, str], None] | None = None
        self.also_shadow: Callable[[Outcome, bool], None] | None = None  # each shadow plan

    def _counter(self, name: str, doc: str, labels: tuple[str, ...]) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def _histogram(
        self, name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]
    ) -> Histogram:
        return Histogram(name, doc, labels, buckets=buckets, registry=self.registry)

    def model_label(self, model: str) -> str:
        """The label of a configured model: its name, or the family pattern that names it
        (a bounded set either way), else ``other``."""
        return self._models.key(model) or "other"

    def record_shadow(self, o: Outcome, overflowed: bool) -> None:
        """Count and log a shadow plan (proxy/edge/shadow.py), apart from what was done."""
        log_request(o, shadow=True)
        self.shadow.record(o, overflowed)
        if self.also_shadow is not None:
            self.also_shadow(o, overflowed)

    def record(self, o: Outcome, content: list[Any] | None = None) -> None:
        """Count ``o`` and log it (with ``content``, the messages, when the config says so)."""
        log_request(o, content)
        model = self.model_label(o.model) if o.model != "-" else "-"
        self._child(self.requests, o.team, model, str(o.status), o.format).inc()
        stats = self.teams.setdefault(o.team, TeamStats())
        stats.requests += 1
        if "not-fitted" in o.actions:
            self._child(self.unfitted, o.team, o.path).inc()
            stats.unfitted += 1
        changed = [a for a in o.actions if a not in UNCHANGED]
        if changed:
            stats.rewritten += 1
            for action in changed:
                # The label is the action's name: its figures ("max-tokens-lowered 64000->9000",
                # "steps-dropped 3") would make a label value per request.
                name, _, detail = action.partition(" ")
                self._child(self.rewritten, o.team, name, o.format).inc()
                if name == FALLBACK:
                    self._child(self.plan_fallbacks, o.team, detail).inc()
                    stats.plan_fallbacks += 1
        if o.tokens_before is not None and o.tokens_after is not None:
            saved = max(0, o.tokens_before - o.tokens_after)
            self._child(self.tokens_before, o.team).observe(o.tokens_before)
            self._child(self.tokens_after, o.team).observe(o.tokens_after)
            self._child(self.tokens_saved, o.team).inc(saved)
            stats.tokens_before += o.tokens_before
            stats.tokens_after += o.tokens_after
            stats.tokens_saved += saved
        if o.retries:
            outcome = "recovered" if o.status < 400 else "failed"
            self._child(self.overflow_retries, o.team, outcome, o.format).inc(o.retries)
            stats.overflow_retries += o.retries
        if o.checkpoint:
            event = o.checkpoint.split()[0]
            self._child(self.checkpoints, o.team, event).inc()
            stats.summaries_created += event == "created"
            stats.summaries_reused += event == "reused"
        if o.prefix is not None:
            self._child(self.prefixes, o.team, model, o.prefix).inc()
            stats.prefix_kept += o.prefix == "kept"
            stats.prefix_broken += o.prefix == "broken"
            if o.prefix != "new" and _trimmed(o):
                self._child(self.trimmed_prefixes, o.team, model, o.prefix).inc()
                stats.trimmed_prefix_kept += o.prefix == "kept"
                stats.trimmed_prefix_broken += o.prefix == "broken"
            if o.cached_tokens:
                self._child(self.cached_tokens, o.team, model).inc(o.cached_tokens)
                stats.cached_tokens_estimated += o.cached_tokens
        if o.costs is not None:
            for kind, value in (
                ("sent", o.costs.sent),
                ("forwarded", o.costs.forwarded),
                ("unbroken", o.costs.unbroken),
            ):
                self._child(self.prompt_cost, o.team, model, kind).inc(max(0.0, value))
            stats.cost_as_sent += o.costs.sent
            stats.cost_as_forwarded += o.costs.forwarded
            stats.money_saved += o.costs.saved
            stats.money_lost_to_cache_breaks += o.costs.lost_to_cache_breaks
        self._child(self.upstream_latency, model).observe(o.upstream)
        self.overhead.observe(o.overhead)
        if self.also is not None:
            self.also(o, model)

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, found again in a dict: prometheus_client checks and
        locks on every ``labels`` call, and every request makes several. The label values are
        a bounded set (teams, model labels, statuses, actions), and no child is ever removed."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def watch(self, source: Callable[[], dict[str, float]]) -> None:
        """Expose the summarizer's own counters, read from ``source`` at scrape time."""
        self.registry.register(_SummarizerCollector(source))

    def watch_store(self, usage: Callable[[], Usage]) -> None:
        """Expose the store's bytes and this process's evictions (proxy/stores/quota.py)."""
        self.registry.register(_StoreCollector(usage))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def team_stats(self) -> dict[str, dict[str, Any]]:
        """Each team's counters, and the share of its trimmed requests that kept their
        prefix (None before any)."""
        out: dict[str, dict[str, Any]] = {}
        for team, s in self.teams.items():
            stats: dict[str, Any] = {
                k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(s).items()
            }
            trimmed = s.trimmed_prefix_kept + s.trimmed_prefix_broken
            share = s.trimmed_prefix_kept / trimmed if trimmed else None
            stats["trimmed_prefix_kept_share"] = None if share is None else round(share, 4)
            out[team] = stats
        for team in self.shadow.teams:  # a team's shadow plans: what it would have saved
            stats = out.setdefault(team, {})
            stats["shadow"] = self.shadow.team_stats(team)
        return out


def _trimmed(o: Outcome) -> bool:
    """Fewer prompt tokens forwarded than the client sent."""
    return (
        o.tokens_before is not None
        and o.tokens_after is not None
        and (o.tokens_after < o.tokens_before)
    )


def log_request(outcome: Outcome, content: list[Any] | None = None, shadow: bool = False) -> None:
    """``shadow``: the line of a shadow plan, whose tokens and actions are what the proxy
    would have done (proxy/edge/shadow.py)."""
    if not log.isEnabledFor(logging.INFO):
        return
    record: dict[str, Any] = {
        "ts": round(time.time(), 3),
        "team": outcome.team,
        "model": outcome.model,
        "format": outcome.format,
        "policy": outcome.policy,
        "status": outcome.status,
        "stream": outcome.stream,
        "tokens_before": outcome.tokens_before,
        "tokens_after": outcome.tokens_after,
        "actions": outcome.actions,
        "retries": outcome.retries,
        "checkpoint": outcome.checkpoint,
        "prefix": outcome.prefix,
        "overhead_ms": round(outcome.overhead * 1000, 3),
        "upstream_ms": round(outcome.upstream * 1000, 3),
    }
    if shadow:
        record["shadow"] = True
        record["cost_saved"] = round(outcome.costs.saved, 8) if outcome.costs else None
    if content is not None:
        record["messages"] = content
    log.info(orjson.dumps(record).decode())


class _SummarizerCollector(Collector):
    def __init__(self, source: Callable[[], dict[str, float]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        s = self._source()
        yield CounterMetricFamily(
            "contextwarden_summarizer_calls", "Calls to the summarizer LLM", s["calls"]
        )
        yield CounterMetricFamily(
            "contextwarden_summarizer_failures",
            "Summaries that failed (truncation used instead)",
            s["failures"],
        )
        yield CounterMetricFamily(
            "contextwarden_store_errors",
            "Checkpoint store operations that failed",
            s["store_errors"],
        )
        yield GaugeMetricFamily(
            "contextwarden_checkpoints_disabled",
            "1 when the checkpoint store could not be opened (summaries fall back to truncation)",
            s.get("store_disabled", 0.0),
        )
        yield GaugeMetricFamily(
            "contextwarden_summarizer_breakers_open",
            "Summarizer circuit breakers open (1 each)",
            s["breakers_open"],
        )


class _StoreCollector(Collector):
    def __init__(self, usage: Callable[[], Usage]) -> None:
        self._usage = usage

    def collect(self) -> Iterator[Metric]:
        u = self._usage()
        yield GaugeMetricFamily(
            "contextwarden_store_bytes",
            "Bytes the store holds under its limits (checkpoints.max_bytes), as of this "
            "process's last write",
            u.held,
        )
        evicted = CounterMetricFamily(
            "contextwarden_store_evictions",
            "Stored objects this process evicted, the oldest first: past a team's "
            "max_bytes_per_team (bound=team) or past max_bytes (bound=total)",
            labels=["bound"],
        )
        evicted.add_metric(["team"], u.evicted_owner)
        evicted.add_metric(["total"], u.evicted_total)
        yield evicted
