"""agentcore's circuit breaker for summarization.

Each failure counts; only a success resets. Once ``max_failures`` is reached the next attempt is
skipped (the request falls back to truncation) and the count drops to ``max_failures - 1``: the
breaker is half-open, so the attempt after that tries the summarizer again. Per process: each
replica finds out for itself that a summarizer is failing (a few calls), as it finds out that
it is back.
"""

from __future__ import annotations


class Breaker:
    def __init__(self, max_failures: int) -> None:
        self.max_failures = max_failures
        self.failures = 0
        self.skipped = 0

    def allow(self) -> bool:
        if self.failures >= self.max_failures:
            self.failures = self.max_failures - 1
            self.skipped += 1
            return False
        return True

    def success(self) -> None:
        self.failures = 0

    def failure(self) -> None:
        self.failures += 1

    @property
    def state(self) -> str:
        if self.failures >= self.max_failures:
            return "open"
        return "half-open" if self.failures == self.max_failures - 1 and self.skipped else "closed"


class Breakers:
    """One breaker per team and summarizer target (model and host), made on first use: one
    team's failures (or its spent quota, which is no failure at all) never switch off another
    team's summaries."""

    def __init__(self) -> None:
        self._by_target: dict[tuple[str, str], Breaker] = {}

    def for_target(self, team: str, key: str, max_failures: int) -> Breaker:
        breaker = self._by_target.get((team, key))
        if breaker is None:
            breaker = self._by_target[(team, key)] = Breaker(max_failures)
        return breaker

    def open_count(self) -> int:
        return sum(b.state == "open" for b in self._by_target.values())
