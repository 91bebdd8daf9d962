"""Resolving a requested model name to its route, window and token pricing, and the one answer
to "what is this model's window for this team": the configured (or table) window, lowered by
what the upstream taught (proxy/windows/learned.py), converted to the proxy's count by the
calibration (proxy/windows/calibration.py). This is the read side; what moves the window at run
time, and keeps it in the store, is proxy/windows/knowledge.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.config.catalog import Upstream
from proxy.config.environment import prepare_environment
from proxy.config.policies import PolicyConfig
from proxy.config.settings import Settings
from proxy.providers.base import Api
from proxy.providers.registry import provider_of
from proxy.windows.calibration import Calibration
from proxy.windows.discovery import DiscoveredWindows
from proxy.windows.families import Families
from proxy.windows.learned import LearnedWindows
from proxy.windows.modeltable import ModelTable
from proxy.windows.tokenizers import Pricing, Tokenizers
from strategies.cost import Prices
from strategies.engine import Policy

MAX_CACHED_NAMES = 4096


@dataclass(frozen=True, slots=True)
class ResolvedPolicy:
    """A policy by name: the engine's view of it and its full config (summaries...)."""

    name: str
    engine: Policy
    config: PolicyConfig


@dataclass(kw_only=True, frozen=True, slots=True)
class Route:
    """Where a model's requests go: the upstream by name, its config, the key the proxy holds
    for it (None: the client's credential goes through) and the wire formats it serves."""

    name: str
    upstream: Upstream
    key: str | None = field(repr=False)  # never in a log line or a traceback
    apis: tuple[Api, ...] = ()


@dataclass(kw_only=True, frozen=True, slots=True)
class ModelSpec:
    name: str
    route: Route
    window: int | None
    max_output: int | None
    pricing: Pricing
    policy: ResolvedPolicy  # the model's own, or the default policy
    prices: Prices | None = None  # dollars per prompt token: litellm's table, config over it
    window_source: str = ""  # where ``window`` comes from, in words
    configured: bool = False  # ``window`` is the config's (a server's own figure never wins)


@dataclass(frozen=True, slots=True)
class Window:
    """A model's window for one team: in the proxy's own count (what the budget is made of),
    in the upstream's units, and why, step by step. None when nothing states it."""

    tokens: int | None
    upstream_tokens: int | None
    why: tuple[str, ...]

    def report(self) -> dict[str, object]:
        return {
            "window": self.tokens,
            "upstream_window": self.upstream_tokens,
            "why": list(self.why),
        }


class Models:
    def __init__(self, settings: Settings, table: ModelTable, tokenizers: Tokenizers) -> None:
        self._settings = settings
        self._table = table
        self._tokenizers = tokenizers
        self._cache: dict[str, ModelSpec] = {}
        self.families = Families(settings.models)
        self._policies = {
            name: ResolvedPolicy(name, p.to_policy(), p) for name, p in settings.policies.items()
        }
        self.learned = LearnedWindows()
        self.calibration = Calibration()
        self.discovered = DiscoveredWindows()

    @property
    def upstream_names(self) -> list[str]:
        return list(self._settings.upstreams)

    @property
    def tokenizers(self) -> Tokenizers:
        """The counters, whose memory the memory budget sizes (proxy/observe/memory.py)."""
        return self._tokenizers

    def resolve(self, name: str) -> ModelSpec:
        spec = self._cache.get(name)
        if spec is None:
            spec = self._build(name)
            if len(self._cache) < MAX_CACHED_NAMES:
                self._cache[name] = spec
        return spec

    def window(
        self, spec: ModelSpec, team: str, cap: int | None = None, learned: bool = True
    ) -> int | None:
        """The window the budget is made of, in the proxy's own tokens: ``window_for``'s steps
        without their words (this runs on every request). ``learned=False``: without what
        overflows taught (a request let through past a lesson, proxy/edge/relearning.py)."""
        return self._steps(spec, team, cap, learned)[3]

    def lowered(self, spec: ModelSpec, team: str) -> int | None:
        """The learned window (the upstream's units) when it lowers ``spec``'s for ``team``:
        a lesson in force; else None."""
        learned = self.learned.get(team, spec.name)
        base = self._base(spec)
        return learned if learned is not None and (base is None or learned < base) else None

    def told_window(self, spec: ModelSpec, team: str, cap: int | None = None) -> int | None:
        """The window a client is told (``/v1/models``), in the upstream's units (what its
        usage figures count): configured, discovered or the table's, lowered by what overflows
        taught and by the team's cap."""
        upstream = self._steps(spec, team, cap)[1]
        if upstream is None:
            return cap
        return min(upstream, cap) if cap else upstream

    def window_for(self, spec: ModelSpec, team: str, cap: int | None = None) -> Window:
        """The one answer to "what is this model's window for this team, in whose units, and
        why": the configured (or family) window, else the one the server stated (discovered),
        else litellm's table's, lowered by what overflow errors taught (all in the upstream's
        units), converted into the proxy's count by the calibration, and capped by the team's
        ``max_context_tokens`` (in the proxy's count)."""
        _, upstream, converted, final = self._steps(spec, team, cap)
        why: list[str] = []
        if spec.window:
            why.append(f"{spec.window}: {spec.window_source}")
        found = None if spec.configured else self.discovered.get(spec.route.name, spec.name)
        if found is not None:
            why.append(f"{found.window}: {found.describe()}")
        stated = self.learned.stated(team, spec.name)
        if stated:
            told = self.learned.evidence_of(team, spec.name)
            why.append(f"{stated}: learned from the upstream's overflow error ({told})")
        bounds = self.learned.bounds(team, spec.name)
        bound = bounds.window() if bounds is not None else None
        if bounds is not None and bound is not None:
            why.append(f"{bound}: {bounds.describe()}")
        if upstream is None or converted is None:
            why.append("unknown: not configured, not in litellm's table, nothing learned")
            return Window(None, None, tuple(why))
        if converted != upstream:
            ratio = self.calibration.ratio(team, spec.name) or 1.0
            why.append(
                f"{converted} in the proxy's count: the calibration finds the upstream counts "
                f"{ratio:.3f} tokens per one of the proxy's"
            )
        if final != converted:
            why.append(f"{final}: the team's max_context_tokens")
        return Window(final, upstream, tuple(why))

    def converted(self, team: str, model: str, window: int, cap: int | None = None) -> int:
        """``window`` (the upstream's units) in the proxy's count for ``team``, capped by the
        team's ``max_context_tokens``."""
        converted = self.calibration.window(team, model, window)
        return cap if cap and cap < converted else converted

    def _base(self, spec: ModelSpec) -> int | None:
        """The window before what overflows taught: the configured one, else the server's own
        figure, else the table's (the upstream's units)."""
        if spec.configured:
            return spec.window
        found = self.discovered.get(spec.route.name, spec.name)
        return found.window if found is not None else spec.window

    def _steps(
        self, spec: ModelSpec, team: str, cap: int | None, with_learned: bool = True
    ) -> tuple[int | None, int | None, int | None, int | None]:
        """(learned, the window in the upstream's units, converted to the proxy's, capped)."""
        learned = self.learned.get(team, spec.name) if with_learned else None
        base = self._base(spec)
        known = [w for w in (base, learned) if w]
        if not known:
            return learned, None, None, None
        upstream = min(known)  # the upstream's units, both
        # An estimated model is calibrated from usage and overflows; an exact one only when an
        # upstream's overflow showed it counts more (another tokenizer behind the same name).
        converted = self.calibration.window(team, spec.name, upstream)
        return learned, upstream, converted, cap if cap and cap < converted else converted

    def _build(self, name: str) -> ModelSpec:
        found = self.families.find(name)
        entry = found[1] if found else None
        upstream = (entry.upstream if entry else None) or self._settings.default_upstream
        table = self._table.lookup(self._table_name(name, upstream))
        window = (entry.context_window if entry else None) or (table.window if table else None)
        if entry is not None and entry.context_window:
            source = f"configured under models: {found[0] if found else name!r}"
        else:
            listed = f"litellm's model table ({self._table_name(name, upstream)})"
            source = (table.source or listed) if table else ""
        max_output = (entry.max_output_tokens if entry else None) or (
            table.max_output if table else None
        )
        pricing = self._tokenizers.for_model(name, entry.tokenizer if entry else None)
        policy_name = (entry.policy if entry else None) or self._settings.default_policy
        prices = table.prices if table else None
        if entry is not None and entry.prices is not None:
            prices = entry.prices.over(prices)
        via = self._settings.upstreams[upstream]
        route = Route(
            name=upstream, upstream=via, key=self._settings.api_key(upstream), apis=via.served_apis
        )
        policy = self._policies[policy_name]
        configured = entry is not None and bool(entry.context_window)
        return ModelSpec(
            name=name,
            route=route,
            window=window,
            max_output=max_output,
            pricing=pricing,
            policy=policy,
            prices=prices,
            window_source=source,
            configured=configured,
        )

    def policy(self, name: str) -> ResolvedPolicy:
        return self._policies[name]

    def _table_name(self, name: str, upstream: str) -> str:
        # A litellm upstream serves the model its own `model:` string names.
        config = self._settings.upstreams.get(upstream)
        return provider_of(config).table_model(config, name) if config is not None else name


def build_models(settings: Settings) -> Models:
    """The models of a configuration, with litellm's bundled table and the tokenizers (the
    environment prepared first: neither may fetch)."""
    prepare_environment()
    return Models(settings, ModelTable.bundled(), Tokenizers(settings.trimming.estimate_ratio))
