"""The memory budget: one setting, ``limits.memory_budget_mb``, bounds what a process holds.

What the process needs to run (its code, litellm's tables, the tokenizers: its footprint,
measured once it has started, and again once litellm has loaded) is taken off first; its
caches share the rest, each its part of it (``SHARES``), each letting its least recently used
entries go first (strategies/bounded_memory.py). Requests in flight come on top of the
budget: a 1 GiB
container runs the default, 768 MiB, with a quarter of a gigabyte for them. A budget below
the footprint leaves the caches ``FLOOR`` (and a warning in the log).

Each cache measures what it holds in bytes of what its entries keep alive, estimated per
entry (tests/strategies/test_bounded_memory.py holds the estimates to tracemalloc's
measure); several hold the same message objects, each counting them.

Large bodies in flight count against the budget while they are parsed, viewed and planned
(``holding``, from proxy/edge/admission.py: a body of ``limits.large_body_bytes`` or more),
``IN_FLIGHT_FACTOR`` times their bytes (a 32 MiB chat body of 25,000 turns raised the
process's peak resident memory by 115 MiB): the caches give that room up while the body is in
flight, and take it back after. A large body that would take the bodies in flight past what
the footprint and the caches' ``FLOOR`` leave waits until one before it is done (one alone
always goes: a budget is no reason to refuse a body under the byte limit). ``/admin/stats``
(``memory``) and ``/metrics`` (``contextwarden_memory_bytes``) show each cache's use and
share, the footprint and the resident memory. With ``serve --workers N`` each worker has
the budget: N times it in all.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from strategies.bounded_memory import Bounded

log = logging.getLogger("contextwarden")
MIB = 1 << 20
FLOOR = 32 * MIB
IN_FLIGHT_FACTOR = 4  # what a large body in flight holds, in times its bytes
# Each cache's part of what the footprint leaves: what one request of a long agent
# conversation holds in each, about (bench/soak.py measures the whole).
SHARES: dict[str, float] = {
    "request items": 0.30,  # proxy/formats/reused_items.py: each conversation's last request
    "message counts": 0.06,  # proxy/request/reused_counts.py: its counts
    # proxy/request/conversations.py: by bytes and by object; strategies/error_output.py and
    # standing.py: each output's reading as an error, each user message's as a standing rule;
    # ledger.py: each message's reading for the ledger, and the files its calls name;
    # proxy/formats/references.py: whether each wire item names content it does not carry
    "message digests": 0.14,
    "checkpoint chains": 0.10,  # strategies/checkpoints/chain.py: by bytes and by object
    "token counts": 0.20,  # strategies/tokens.py: each tokenizer's messages and short texts
    "fingerprints": 0.06,  # proxy/request/conversations.py: each conversation's last prompt
    "cuts": 0.05,  # proxy/request/sticky_cuts.py: its last cut
    "seen conversations": 0.03,  # proxy/summaries/seen.py
    "pins": 0.02,  # proxy/request/conversations.py
    "recalled outputs": 0.04,  # proxy/request/recall.py: cleared outputs a model may recall
}


# The cross-request caches: what they hold only saves work (a request is parsed, digested and
# counted afresh without them, with the same result). ``caches: off`` (for debugging) gives
# them no memory, so they keep nothing; BENCHMARKS.md ("Cross-request caches") has what each
# saves. The other memories hold state (what was sent, cut, seen, pinned), not a speed-up.
CACHES = (
    "request items",
    "message counts",
    "message digests",
    "checkpoint chains",
    "token counts",
)


def resident() -> int:
    """This process's resident memory, in bytes (Linux: now; elsewhere: its peak)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class MemoryBudget:
    def __init__(self, budget_mb: int, caches: bool = True) -> None:
        self.budget = budget_mb * MIB
        self.emptied = frozenset() if caches else frozenset(CACHES)  # ``caches: off``
        self.footprint = 0
        self.caches = 0  # what the caches share
        self.in_flight = 0  # what large bodies in flight are counted to hold (``holding``)
        self.waited = 0  # large bodies that waited for room
        self._memories: dict[str, list[Bounded]] = {}
        self._room: asyncio.Condition | None = None  # made in the event loop, on first need

    def add(self, name: str, *memories: Bounded) -> None:
        """``name``'s memories (its part of ``SHARES``, split evenly between them)."""
        self._memories.setdefault(name, []).extend(memories)

    def measure(self) -> None:
        """Measure the footprint (the resident memory less what the caches hold) and give
        each cache its part of what it leaves."""
        self.footprint = max(0, resident() - self.held - self.in_flight)
        if self.budget - self.footprint < FLOOR:
            log.warning(
                "memory budget %d MiB is below this process's footprint (%d MiB): its caches "
                "get %d MiB",
                self.budget // MIB, self.footprint // MIB, FLOOR // MIB,
            )  # fmt: skip
        self._share()
        log.info("%s", self.summary())

    def _share(self) -> None:
        """Give each cache its part of what the footprint and the bodies in flight leave."""
        self.caches = max(FLOOR, self.budget - self.footprint - self.in_flight)
        for name, memories in self._memories.items():
            part = 0 if name in self.emptied else int(self.caches * SHARES[name] / len(memories))
            for memory in memories:
                memory.resize(part)

    @property
    def room(self) -> int:
        """What large bodies in flight may hold together: the budget less the footprint and
        the caches' ``FLOOR``."""
        return self.budget - self.footprint - FLOOR

    @asynccontextmanager
    async def holding(self, size: int) -> AsyncIterator[None]:
        """A large body of ``size`` bytes in flight while the block runs: counted against the
        budget (the caches shrink by it), after waiting while it would take the bodies in
        flight past ``room`` (unless none is)."""
        cost = size * IN_FLIGHT_FACTOR
        if self._room is None:
            self._room = asyncio.Condition()
        async with self._room:
            if not self._fits(cost):
                self.waited += 1
                await self._room.wait_for(lambda: self._fits(cost))
            self.in_flight += cost
        self._share()
        try:
            yield
        finally:
            async with self._room:
                self.in_flight -= cost
                self._room.notify_all()
            self._share()

    def _fits(self, cost: int) -> bool:
        return self.in_flight == 0 or self.in_flight + cost <= self.room

    @property
    def held(self) -> int:
        return sum(m.held for ms in self._memories.values() for m in ms)

    def summary(self) -> str:
        """One line for the log: the split."""
        return (
            f"memory: budget {self.budget // MIB} MiB, footprint {self.footprint // MIB} MiB, "
            f"caches {self.caches // MIB} MiB (limits.memory_budget_mb)"
        )

    def figures(self) -> dict[str, Any]:
        """For /admin/stats: the budget, its split and each cache's use, in MiB."""
        caches = {
            name: {
                "held_mb": _mib(sum(m.held for m in ms)),
                "limit_mb": _mib(sum(m.limit for m in ms)),
                "entries": sum(len(m) for m in ms),
            }
            for name, ms in self._memories.items()
        }
        return {
            "budget_mb": self.budget // MIB,
            "footprint_mb": _mib(self.footprint),
            "caches_mb": _mib(self.caches),
            "held_mb": _mib(self.held),
            "in_flight_mb": _mib(self.in_flight),
            "waited_for_room": self.waited,
            "resident_mb": _mib(resident()),
            "caches": caches,
        }

    def collect(self) -> Iterator[Metric]:
        """For /metrics (a prometheus_client collector)."""
        gauge = GaugeMetricFamily(
            "contextwarden_memory_bytes",
            "Memory: each cache's held bytes and limit, the budget, footprint and resident",
            labels=["part", "kind"],
        )
        for name, memories in self._memories.items():
            gauge.add_metric([name, "held"], sum(m.held for m in memories))
            gauge.add_metric([name, "limit"], sum(m.limit for m in memories))
        gauge.add_metric(["process", "budget"], self.budget)
        gauge.add_metric(["process", "footprint"], self.footprint)
        gauge.add_metric(["large bodies in flight", "held"], self.in_flight)
        gauge.add_metric(["process", "resident"], resident())
        yield gauge


def _mib(value: int) -> float:
    return round(value / MIB, 1)
