"""How much summarizing one request, and one team, may cost.

``Allowance`` bounds one checkpoint's work: a number of summarizer calls and a deadline, after
which the request truncates instead. ``TeamQuota`` bounds a team's calls per rolling hour
(``teams.<name>.summarizer_calls_per_hour``); its figures are in ``/admin/stats``.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from proxy.summaries.llm import AllowanceSpent

HOUR = 3600.0
MIN_CALL_SECONDS = 0.05


@dataclass(slots=True)
class TeamQuota:
    per_hour: int | None
    calls: int = 0
    refused: int = 0
    _recent: deque[float] = field(default_factory=deque)

    def left(self, now: float) -> int | None:
        if self.per_hour is None:
            return None
        while self._recent and self._recent[0] <= now - HOUR:
            self._recent.popleft()
        return self.per_hour - len(self._recent)

    def take(self, now: float) -> None:
        self.calls += 1
        if self.per_hour is not None:
            self._recent.append(now)


@dataclass(slots=True)
class Allowance:
    calls: int
    deadline: float  # time.monotonic()
    quota: TeamQuota

    @classmethod
    def start(cls, calls: int, seconds: float, quota: TeamQuota) -> Allowance:
        return cls(calls, time.monotonic() + seconds, quota)

    def affordable(self, wanted: int) -> int:
        """How many of ``wanted`` calls this request and its team may still make."""
        team = self.quota.left(time.monotonic())
        return max(0, min(wanted, self.calls, wanted if team is None else team))

    def take(self, timeout: float) -> float:
        """Spend one call; returns its time-out (never past the deadline)."""
        now = time.monotonic()
        left = self.deadline - now
        if self.calls <= 0:
            raise AllowanceSpent("the request's summarizer calls are used up")
        if left < MIN_CALL_SECONDS:
            raise AllowanceSpent("the request's summarizing deadline has passed")
        if self.quota.left(now) == 0:
            self.quota.refused += 1
            raise AllowanceSpent("the team's summarizer calls for this hour are used up")
        self.calls -= 1
        self.quota.take(now)
        return min(timeout, left)
