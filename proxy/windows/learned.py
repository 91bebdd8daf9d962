"""What the upstream taught about a model's window, per team: the window its overflow errors
stated, in the upstream's own units (converted to the proxy's count at use, by the
calibration), and how such a lesson is keyed in the store.

Scoped to the team whose request taught it, so one team's traffic (text its tokenizer counts
differently, say) cannot shrink a model's window for the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.windows.bounds import Bounds
from proxy.windows.sane import sane_window

# Bounds kept for (team, model) pairs that were never refused: what a team's answers took,
# waiting for a first refusal to make it useful. Past this many, new pairs are not tracked.
MAX_UNREFUSED = 4096


@dataclass(frozen=True, slots=True)
class Lesson:
    """What an overflow error taught, in the upstream's own units: the window it stated, and
    its count of the prompt (None when it stated none)."""

    window: int
    theirs: int | None
    evidence: str


class LearnedWindows:
    """Windows learned from upstream overflow errors, in the upstream's own units (the limit
    its error states; converted to the proxy's count at use, by the calibration).

    Scoped to the team whose request taught them, so one team's traffic (text its tokenizer
    counts differently, say) cannot shrink a model's window for the others. The window is the
    limit the upstream's own error stated (detection reads figures only from the upstream's
    own words, proxy/overflow/detect.py), never one derived from the request's text.

    An overflow that states no figures sets a bound instead (proxy/windows/bounds.py): the
    window in force is the lower of the stated one and the bounds' window."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], int] = {}
        self._evidence: dict[tuple[str, str], str] = {}
        self._bounds: dict[tuple[str, str], Bounds] = {}

    def get(self, team: str, model: str) -> int | None:
        stated = self._windows.get((team, model))
        bounds = self._bounds.get((team, model))
        bound = bounds.window() if bounds is not None else None
        if stated is None or bound is None:
            return stated if bound is None else bound
        return min(stated, bound)

    def stated(self, team: str, model: str) -> int | None:
        """The window the upstream's errors stated, alone."""
        return self._windows.get((team, model))

    def bounds(self, team: str, model: str) -> Bounds | None:
        return self._bounds.get((team, model))

    def refuse(self, team: str, model: str, need: int) -> Bounds | None:
        """A request of ``need`` (the upstream's units) refused without figures: the bounds,
        when they moved."""
        bounds = self._bounds.setdefault((team, model), Bounds())
        return bounds if bounds.refuse(need) else None

    def accept(self, team: str, model: str, need: int) -> Bounds | None:
        """A request of ``need`` answered whole: the bounds, when they moved."""
        key = (team, model)
        bounds = self._bounds.get(key)
        if bounds is None:
            if len(self._bounds) >= MAX_UNREFUSED:
                return None
            bounds = self._bounds[key] = Bounds()
        return bounds if bounds.accept(need) else None

    def restore_bounds(self, team: str, model: str, bounds: Bounds) -> None:
        self._bounds[(team, model)] = bounds

    def learn(self, team: str, model: str, window: int, evidence: str = "") -> bool:
        """Apply ``window`` (windows only go down); False when it is not lower than what was
        learned, or is no sane window (proxy/windows/sane.py)."""
        key = (team, model)
        if sane_window(window) is None:
            return False
        current = self._windows.get(key)
        if current is not None and window >= current:
            return False
        self._windows[key] = window
        if evidence:
            self._evidence[key] = evidence
        return True

    def forget(self, team: str, model: str) -> bool:
        """Forget what was learned (the window and its bounds); whether there was anything."""
        had = self._windows.pop((team, model), None) is not None
        self._evidence.pop((team, model), None)
        bounds = self._bounds.pop((team, model), None)
        return (bounds is not None and bounds.refused is not None) or had

    def teams_of(self, model: str) -> list[str]:
        """The teams something was learned about ``model`` for."""
        keys = [*self._windows, *self._bounds]
        return sorted({team for team, name in keys if name == model})

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

    def without_figures(self) -> dict[str, dict[str, dict[str, int | None]]]:
        """The bounds of every model something was refused for, and the window they set."""
        out: dict[str, dict[str, dict[str, int | None]]] = {}
        for (team, model), b in self._bounds.items():
            if b.refused is not None:
                out.setdefault(team, {})[model] = {
                    "window": b.window(),
                    "refused": b.refused,
                    "accepted": b.accepted,
                    "refusals": b.refusals,
                }
        return out


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
