"""The figures of a replayed session, and of all of them: requests, prompt tokens with and
without the proxy, requests trimmed, summaries it would have made, the share of prompt tokens
in a prefix equal to the previous request's (what a provider's prompt cache can serve), and
the prompt's cost with and without the proxy (strategies/cost.py: the proxy's own figures).

Without the proxy, the prompt is the client's whole conversation each time (as if the window
allowed it: ``over_window`` counts the requests it could not have held), and an append-only
client keeps the previous prompt as its prefix; with it, the prompt is what the proxy
forwards, and its prefix is kept only where the proxy kept it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from proxy.estimate.session import Session
from proxy.request.conversations import Seen
from proxy.request.planning.plan import Plan
from strategies.cost import PromptCosts


@dataclass(kw_only=True)
class Totals:
    requests: int = 0
    tokens_without: int = 0  # prompt tokens the client sent (tools included)
    tokens_with: int = 0  # prompt tokens the proxy forwards
    trimmed: int = 0  # requests forwarded with fewer tokens than sent
    summaries: int = 0  # summaries the proxy would have asked its summarizer for
    cached_without: int = 0  # prompt tokens in a prefix equal to the previous request's
    cached_with: int = 0
    cost_without: float | None = None  # prompt dollars (None: the model has no prices)
    cost_with: float | None = None
    over_window: int = 0  # requests whose whole prompt the window could not hold
    unfitted: int = 0  # requests the proxy would not fit (an unknown window)
    refused: int = 0  # requests the proxy would refuse (the reason in ``errors``)

    def merge(self, other: Totals) -> None:
        for name in ("requests", "tokens_without", "tokens_with", "trimmed", "summaries"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("cached_without", "cached_with", "over_window", "unfitted", "refused"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.cost_without is not None and other.cost_with is not None:
            self.cost_without = (self.cost_without or 0.0) + other.cost_without
            self.cost_with = (self.cost_with or 0.0) + other.cost_with


@dataclass(kw_only=True)
class Figures(Totals):
    session: Session
    model: str
    window: int | None
    errors: list[str] = field(default_factory=list)

    def add(self, plan: Plan, seen: Seen | None, costs: PromptCosts | None) -> None:
        self.requests += 1
        if plan.prompts is None or seen is None:
            self.unfitted += 1
            return
        sent, forwarded = plan.prompts
        self.tokens_without += sent
        self.tokens_with += forwarded
        self.trimmed += forwarded < sent
        self.over_window += self.window is not None and sent > self.window
        self.cached_without += seen.previous_sent if seen.state != "new" else 0
        self.cached_with += seen.cached_tokens
        if costs is not None:
            self.cost_without = (self.cost_without or 0.0) + costs.sent
            self.cost_with = (self.cost_with or 0.0) + costs.forwarded

    def refuse(self, reason: str) -> None:
        self.requests += 1
        self.refused += 1
        if reason not in self.errors:
            self.errors.append(reason)

    def as_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "session"}
        out |= {
            "session": self.session.name,
            "client": self.session.client,
            "notes": self.session.notes,
        }
        return out


def total(figures: list[Figures]) -> Totals:
    out = Totals()
    for f in figures:
        out.merge(f)
    return out


def _requests(count: int) -> str:
    return f"{count} request" + ("s" if count != 1 else "")


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _saved(without: float | None, with_: float | None) -> str:
    if not without or with_ is None:
        return ""
    return f" ({100 * (with_ - without) / without:+.1f}%)"


HEADER = (
    f"{'session':<40} {'requests':>8} {'trimmed':>7} {'summaries':>9} "
    f"{'tokens without':>14} {'with':>18} {'cached w/o':>10} {'with':>5} "
    f"{'cost without':>12} {'with':>20}"
)


def row(name: str, t: Totals) -> str:
    tokens = f"{t.tokens_with}{_saved(t.tokens_without, t.tokens_with)}"
    cost = f"{_money(t.cost_with)}{_saved(t.cost_without, t.cost_with)}"
    return (
        f"{name[-40:]:<40} {t.requests:>8} {t.trimmed:>7} {t.summaries:>9} "
        f"{t.tokens_without:>14} {tokens:>18} {_share(t.cached_without, t.tokens_without):>10} "
        f"{_share(t.cached_with, t.tokens_with):>5} {_money(t.cost_without):>12} {cost:>20}"
    )


def render(figures: list[Figures]) -> str:
    """The table: a row per session, the total, and what each session's figures rest on."""
    lines = [HEADER]
    lines += [row(f.session.name, f) for f in figures]
    count = f"{len(figures)} session" + ("s" if len(figures) != 1 else "")
    lines.append(row(f"total ({count})", total(figures)))
    for f in figures:
        said = [f"{f.session.client}, {f.model}, window {f.window or 'unknown'}"]
        said += f.session.notes
        if f.over_window:
            said.append(f"{_requests(f.over_window)} over the window without the proxy")
        if f.unfitted:
            said.append(f"{_requests(f.unfitted)} not fitted (unknown window: give --window)")
        said += [f"refused: {e}" for e in f.errors]
        lines.append(f"  {f.session.name}: {'; '.join(said)}")
    return "\n".join(lines)
