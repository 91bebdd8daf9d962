"""Usage calibration: an estimating counter made honest by what the upstream says it counted.

For a model the proxy only estimates (``tokenizer: estimate``, e.g. current Claude models: a
cl100k count times ``estimate_ratio``), every answer read whole carries the upstream's own count
of the prompt: ``usage.prompt_tokens`` (chat), ``usage.input_tokens`` (Responses), or
``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` (Messages). The ratio
``theirs / ours`` says how the estimate runs. The window in the proxy's own tokens becomes
``window / ratio``, with the ratio taken conservatively: the largest of the last ``KEEP``
observations, plus ``SLACK``, once ``MIN_SEEN`` have been made. An estimate running high (ratio
under 1) gives its room back; one running low shrinks the budget before the upstream overflows.

Scoped per team and model, like learned windows (a team's text, which it chooses, moves only its
own ratio), and persisted with them in the store under ``calibration\\t`` keys (the ratio in
thousandths).
"""

from __future__ import annotations

import math
from collections import deque

KEEP = 16
MIN_SEEN = 3
SLACK = 1.02
LOW, HIGH = 0.5, 2.0  # the ratio is clamped: a wild answer cannot unbound the budget
PREFIX = "calibration\t"


class Calibration:
    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], deque[float]] = {}

    def observe(self, team: str, model: str, ratio: float) -> float | None:
        """Record one answer's ratio; the calibrated ratio now in force (None: not yet)."""
        seen = self._seen.setdefault((team, model), deque(maxlen=KEEP))
        seen.append(min(HIGH, max(LOW, ratio)))
        return self.ratio(team, model)

    def ratio(self, team: str, model: str) -> float | None:
        seen = self._seen.get((team, model))
        if seen is None or len(seen) < MIN_SEEN:
            return None
        return min(HIGH, max(seen) * SLACK)

    def window(self, team: str, model: str, window: int) -> int:
        """``window`` in the proxy's own tokens for this team and model."""
        ratio = self.ratio(team, model)
        return window if ratio is None else math.floor(window / ratio)

    def observed(self, team: str, model: str) -> float | None:
        """The largest recent observation (what is persisted; the slack is added on use)."""
        seen = self._seen.get((team, model))
        return max(seen) if seen and len(seen) >= MIN_SEEN else None

    def restore(self, team: str, model: str, ratio: float) -> None:
        """A persisted observation: counts as ``MIN_SEEN`` of them, until fresh ones replace
        it."""
        seen = self._seen.setdefault((team, model), deque(maxlen=KEEP))
        seen.extend([min(HIGH, max(LOW, ratio))] * MIN_SEEN)

    def items(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for team, model in self._seen:
            ratio = self.ratio(team, model)
            if ratio is not None:
                out.setdefault(team, {})[model] = round(ratio, 4)
        return out
