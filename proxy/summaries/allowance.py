"""How much summarizing one request, and one team, may cost.

``Allowance`` bounds one checkpoint's work: a number of summarizer calls and a deadline, after
which the request truncates instead. ``TeamQuota`` bounds a team's calls per rolling hour
(``teams.<name>.summarizer_calls_per_hour``), counted in the store: every process and replica
of the store takes its calls from the one quota (a count per process would give K replicas K
times the quota). A store that cannot count refuses the call (the request truncates): a quota
is a cap. Its figures are in ``/admin/stats``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from proxy.stores.guarded import StoreFault
from proxy.summaries.llm import AllowanceSpent

HOUR = 3600.0
MIN_CALL_SECONDS = 0.05
log = logging.getLogger("contextwarden.compaction")


class Slots(Protocol):
    async def take_slot(self, key: str, limit: int, window_seconds: float) -> bool: ...

    async def slots_taken(self, key: str, window_seconds: float) -> int: ...


@dataclass(kw_only=True, slots=True)
class TeamQuota:
    team: str
    per_hour: int | None
    store: Slots
    calls: int = 0  # this process's calls and refusals (the quota itself is the store's)
    refused: int = 0

    @property
    def key(self) -> str:
        return f"summarizer-calls\t{self.team}"

    async def left(self) -> int | None:
        """The team's calls left this hour (None: no cap; 0 when the store cannot say)."""
        if self.per_hour is None:
            return None
        try:
            taken = await self.store.slots_taken(self.key, HOUR)
        except StoreFault:  # the store logged it
            return 0
        return max(0, self.per_hour - taken)

    async def take(self, refusal: bool = True) -> bool:
        """One call of the team's quota; False (and counted as refused, with ``refusal``)
        when none is left."""
        if self.per_hour is not None:
            try:
                taken = await self.store.take_slot(self.key, self.per_hour, HOUR)
            except StoreFault as exc:  # a cap that cannot be counted holds
                log.warning("team %s: its summarizer quota cannot be counted: %s", self.team, exc)
                taken = False
            if not taken:
                self.refused += refusal
                return False
        self.calls += 1
        return True


@dataclass(kw_only=True, slots=True)
class Allowance:
    calls: int
    deadline: float  # time.monotonic()
    quota: TeamQuota
    # The team's calls taken ahead for this checkpoint's pieces (``affordable``), spent by
    # ``take``: a job never starts pieces its team's quota cannot finish.
    reserved: int = 0

    @classmethod
    def start(cls, calls: int, seconds: float, quota: TeamQuota) -> Allowance:
        return cls(calls=calls, deadline=time.monotonic() + seconds, quota=quota)

    async def affordable(self, wanted: int) -> int:
        """How many of ``wanted`` calls this request and its team may still make, taken from
        the team's quota now: concurrent checkpoints (of this process or another replica)
        that each read what was left and then spent it call by call would start more pieces
        than the quota holds, and a checkpoint cut short by it is calls spent for nothing
        (#56: 1 checkpoint for 4 calls). A call none was left for is counted as refused."""
        # Refused once, when not one call is left (fewer pieces summarized is no refusal).
        while self.reserved < min(wanted, self.calls):
            if not await self.quota.take(refusal=self.reserved == 0):
                break
            self.reserved += 1
        return min(wanted, self.reserved)

    async def take(self, timeout: float) -> float:
        """Spend one call (a reserved one first); returns its time-out (never past the
        deadline)."""
        left = self.deadline - time.monotonic()
        if self.calls <= 0:
            raise AllowanceSpent("the request's summarizer calls are used up")
        if left < MIN_CALL_SECONDS:
            raise AllowanceSpent("the request's summarizing deadline has passed")
        if self.reserved > 0:
            self.reserved -= 1
        elif not await self.quota.take():
            raise AllowanceSpent("the team's summarizer calls for this hour are used up")
        self.calls -= 1
        return min(timeout, self.deadline - time.monotonic())
