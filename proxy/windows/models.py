"""Resolving a requested model name to its route, window and token pricing; and the two ways a
window moves at run time, per team and model: learned from overflow errors (in the upstream's
units), and converted to the proxy's by the calibration (proxy/windows/calibration.py).

Both are scoped per team and model (a team's text, which it chooses, moves only its own), and
persisted in the store: a learned window under its ``team\\tmodel`` key, a calibration's fit
under ``calibration…\\t`` keys (proxy/windows/calibration.py ``to_settings``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.config.catalog import Api, Upstream
from proxy.config.policies import PolicyConfig
from proxy.config.settings import Settings
from proxy.windows.calibration import Calibration
from proxy.windows.families import Families
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


@dataclass(frozen=True, slots=True)
class Route:
    """Where a model's requests go: the upstream by name, its config, the key the proxy holds
    for it (None: the client's credential goes through) and the wire formats it serves."""

    name: str
    upstream: Upstream
    key: str | None = field(repr=False)  # never in a log line or a traceback
    apis: tuple[Api, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    route: Route
    window: int | None
    max_output: int | None
    pricing: Pricing
    policy: ResolvedPolicy  # the model's own, or the default policy
    prices: Prices | None = None  # dollars per prompt token: litellm's table, config over it
    window_source: str = ""  # where ``window`` comes from, in words


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


class LearnedWindows:
    """Windows learned from upstream overflow errors, in the upstream's own units (the limit
    its error states; converted to the proxy's count at use, by the calibration).

    Scoped to the team whose request taught them, so one team's traffic (text its tokenizer
    counts differently, say) cannot shrink a model's window for the others. A window under the
    floor the caller gives (half of what the upstream itself stated as its limit) is held as
    pending, not applied, until an operator confirms it through the admin API."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], int] = {}
        self._pending: dict[tuple[str, str], int] = {}
        self._evidence: dict[tuple[str, str], str] = {}

    def get(self, team: str, model: str) -> int | None:
        return self._windows.get((team, model))

    def learn(self, team: str, model: str, window: int, floor: int = 0, evidence: str = "") -> bool:
        """Apply ``window`` (windows only go down); False when it is held as pending or is not
        lower than what was learned."""
        key = (team, model)
        if window <= 0:
            return False
        if window < floor:
            self._pending[key] = min(window, self._pending.get(key, window))
            return False
        current = self._windows.get(key)
        if current is not None and window >= current:
            return False
        self._windows[key] = window
        if evidence:
            self._evidence[key] = evidence
        return True

    def confirm(self, team: str, model: str) -> int | None:
        """An operator's confirmation of a pending window: applied, whatever the floor."""
        window = self._pending.pop((team, model), None)
        if window is not None:
            self.learn(team, model, window)
        return window

    def forget(self, team: str, model: str) -> bool:
        """Forget what was learned (applied or pending); whether there was anything."""
        had = self._windows.pop((team, model), None) is not None
        self._evidence.pop((team, model), None)
        return self._pending.pop((team, model), None) is not None or had

    def evidence(self) -> dict[str, dict[str, str]]:
        """What taught each window (windows restored from the store say so)."""
        out: dict[str, dict[str, str]] = {}
        for team, model in self._windows:
            out.setdefault(team, {})[model] = self.evidence_of(team, model)
        return out

    def evidence_of(self, team: str, model: str) -> str:
        return self._evidence.get((team, model), "restored from the store")

    def items(self) -> dict[str, dict[str, int]]:
        return _nested(self._windows)

    def pending(self) -> dict[str, dict[str, int]]:
        return _nested(self._pending)


def store_key(team: str, model: str) -> str:
    """How a team's learned window is keyed in the checkpoint store."""
    return f"{team}\t{model}"


def from_store_key(key: str) -> tuple[str, str] | None:
    team, sep, model = key.partition("\t")
    return (team, model) if sep else None  # a key from before windows were per team: ignored


def _nested(flat: dict[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (team, model), window in flat.items():
        out.setdefault(team, {})[model] = window
    return out


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

    def window(self, spec: ModelSpec, team: str, cap: int | None = None) -> int | None:
        """The window the budget is made of, in the proxy's own tokens: ``window_for``'s steps
        without their words (this runs on every request)."""
        return self._steps(spec, team, cap)[3]

    def window_for(self, spec: ModelSpec, team: str, cap: int | None = None) -> Window:
        """The one answer to "what is this model's window for this team, in whose units, and
        why": the configured (or family, or table) window, lowered by what overflow errors
        taught (both in the upstream's units), converted into the proxy's count by the
        calibration, and capped by the team's ``max_context_tokens`` (in the proxy's count)."""
        learned, upstream, converted, final = self._steps(spec, team, cap)
        why: list[str] = []
        if spec.window:
            why.append(f"{spec.window}: {spec.window_source}")
        if learned:
            told = self.learned.evidence_of(team, spec.name)
            why.append(f"{learned}: learned from the upstream's overflow error ({told})")
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

    def _steps(
        self, spec: ModelSpec, team: str, cap: int | None
    ) -> tuple[int | None, int | None, int | None, int | None]:
        """(learned, the window in the upstream's units, converted to the proxy's, capped)."""
        learned = self.learned.get(team, spec.name)
        known = [w for w in (spec.window, learned) if w]
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
            source = f"litellm's model table ({self._table_name(name, upstream)})" if table else ""
        max_output = (entry.max_output_tokens if entry else None) or (
            table.max_output if table else None
        )
        pricing = self._tokenizers.for_model(name, entry.tokenizer if entry else None)
        policy_name = (entry.policy if entry else None) or self._settings.default_policy
        prices = table.prices if table else None
        if entry is not None and entry.prices is not None:
            prices = entry.prices.over(prices)
        via = self._settings.upstreams[upstream]
        route = Route(upstream, via, self._settings.api_key(upstream), via.served_apis)
        policy = self._policies[policy_name]
        return ModelSpec(name, route, window, max_output, pricing, policy, prices, source)

    def policy(self, name: str) -> ResolvedPolicy:
        return self._policies[name]

    def _table_name(self, name: str, upstream: str) -> str:
        # A litellm upstream serves the model its own `model:` string names.
        config = self._settings.upstreams.get(upstream)
        if config is not None and config.provider == "litellm" and config.model:
            return config.model
        return name
