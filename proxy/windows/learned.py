"""What the upstream taught about a model's window, per team: the window its overflow errors
stated, in the upstream's own units (converted to the proxy's count at use, by the
calibration), and how such a lesson is keyed in the store.

Scoped to the team whose request taught it, so one team's traffic (text its tokenizer counts
differently, say) cannot shrink a model's window for the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from proxy.windows.bounds import Bounds
from proxy.windows.sane import sane_window

# Bounds kept for (team, model) pairs that were never refused: what a team's answers took,
# waiting for a first refusal to make it useful. Past this many, the least recently answered
# pair that was never refused makes room.
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
    window in force is the lower of the stated one and the bounds' window.

    A lesson is tried again after a while (``due``): once its window held requests back for
    ``after_seconds`` or ``after_requests``, one request is let through past it; the upstream's
    answer heals a wrong lesson, or a window that grew (``healed``), and an overflow teaches
    it again. When each lesson was learned is kept (``learned_at``) for the refusals that rest
    on it."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._windows: dict[tuple[str, str], int] = {}
        self._evidence: dict[tuple[str, str], str] = {}
        self._bounds: dict[tuple[str, str], Bounds] = {}
        self._clock, self._wall = clock, wall
        self._at: dict[tuple[str, str], float] = {}  # wall-clock time a lesson was learned
        # Since when (the clock's), and for how many requests, a lesson held requests back
        # without being tried again.
        self._held: dict[tuple[str, str], tuple[float, int]] = {}

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

    def refuse(self, team: str, model: str, need: int, sure: bool = False) -> Bounds | None:
        """A request of ``need`` (the upstream's units) refused without figures: the bounds,
        when they moved (``sure``: the upstream's own figures say so)."""
        bounds = self._bounds.setdefault((team, model), Bounds())
        if not bounds.refuse(need, sure):
            return None
        self._learned((team, model))
        return bounds

    def accept(self, team: str, model: str, need: int, prompt: int | None = None) -> Bounds | None:
        """A request of ``need`` (``prompt`` and its reply limit) answered whole: the bounds,
        when they moved."""
        key = (team, model)
        bounds = self._bounds.pop(key, None)  # put back last: the most recently answered
        if bounds is None:
            if len(self._bounds) >= MAX_UNREFUSED and not self._make_room():
                return None
            bounds = Bounds()
        self._bounds[key] = bounds
        return bounds if bounds.accept(need, prompt) else None

    def _make_room(self) -> bool:
        """One pair that was never refused let go, the least recently answered: a flood of new
        callers or names (in passthrough anyone may bring a new credential) never stops the
        others' pairs from being tracked. False when every pair holds a refusal."""
        oldest = next((k for k, b in self._bounds.items() if b.refused is None), None)
        if oldest is None:
            return False
        del self._bounds[oldest]
        return True

    def restore_bounds(self, team: str, model: str, bounds: Bounds) -> None:
        self._bounds[(team, model)] = bounds

    def restore_at(self, team: str, model: str, at: float) -> None:
        """When a lesson the store kept was learned."""
        self._at[(team, model)] = at

    def learned_at(self, team: str, model: str) -> float | None:
        """When the lesson in force was learned (wall-clock seconds; None: not known)."""
        return self._at.get((team, model))

    def due(self, team: str, model: str, after_seconds: float, after_requests: int) -> bool:
        """A request held back by the lesson about ``model``: whether it is the one let through
        past it (``after_seconds`` since the lesson was learned or last tried, or the
        ``after_requests``-th held back since; 0: never by that measure)."""
        key = (team, model)
        now = self._clock()
        since, held = self._held.get(key, (now, 0))
        held += 1
        due = (after_seconds > 0 and now - since >= after_seconds) or (
            after_requests > 0 and held >= after_requests
        )
        self._held[key] = (now, 0) if due else (since, held)
        return due

    def healed(self, team: str, model: str, need: int, prompt: int | None) -> bool:
        """A request let through past the lesson was answered whole (``need``: its prompt and
        reply limit; ``prompt``: the prompt, when counted): what it disproves is forgotten.
        Whether anything was."""
        key = (team, model)
        bounds = self._bounds.get(key)
        healed = bounds is not None and bounds.heal(need, prompt)
        stated = self._windows.get(key)
        if stated is not None and prompt is not None and prompt > stated:
            del self._windows[key]
            self._evidence.pop(key, None)
            healed = True
        return healed

    def _learned(self, key: tuple[str, str]) -> None:
        self._at[key] = self._wall()
        self._held[key] = (self._clock(), 0)

    def learn(
        self, team: str, model: str, window: int, evidence: str = "", restored: bool = False
    ) -> bool:
        """Apply ``window`` (windows only go down); False when it is not lower than what was
        learned, or is no sane window (proxy/windows/sane.py). ``restored``: read from the
        store, learned at another time (``restore_at``)."""
        key = (team, model)
        if sane_window(window) is None:
            return False
        current = self._windows.get(key)
        if current is not None and window >= current:
            return False
        self._windows[key] = window
        if evidence:
            self._evidence[key] = evidence
        if restored:
            self._held[key] = (self._clock(), 0)
        else:
            self._learned(key)
        return True

    def forget(self, team: str, model: str) -> bool:
        """Forget what was learned (the window and its bounds); whether there was anything."""
        had = self._windows.pop((team, model), None) is not None
        self._evidence.pop((team, model), None)
        self._at.pop((team, model), None)
        self._held.pop((team, model), None)
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
                    "largest_prompt_taken": b.largest,
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
