"""Work left for after an answer (proxy/edge/background.py) waits for a quiet moment, runs in
the order it came, and never waits past its bounds; shutdown runs what is left. The clock is
the test's: nothing here depends on how busy the machine is."""

from __future__ import annotations

import asyncio

import pytest

import proxy.edge.background as background
from proxy.edge.background import MOST, MOST_SECONDS, QUIET, Background


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(background, "monotonic", made)
    return made


async def settle() -> None:
    """Long enough for the worker to look at the clock a few times."""
    await asyncio.sleep(QUIET * 5)


async def test_work_waits_for_quiet_and_runs_in_order(clock: Clock) -> None:
    bg, ran = Background(), []

    async def work(i: int) -> None:
        ran.append(i)

    bg.arrived()
    for i in range(3):
        bg.start(work(i), 10)
    await settle()
    assert ran == []  # a request arrived just now (the clock has not moved)
    clock.now += QUIET / 2
    bg.arrived()
    await settle()
    assert ran == []
    clock.now += QUIET
    await settle()
    assert ran == [0, 1, 2]


async def test_too_much_waiting_runs_the_oldest_at_once(clock: Clock) -> None:
    bg, ran = Background(), []

    async def work(i: int) -> None:
        ran.append(i)

    bg.arrived()
    for i in range(MOST + 3):
        bg.start(work(i))
    await settle()
    assert ran == [0, 1, 2]  # down to the most that may wait, the oldest first
    bg.start(work(-1), background.MOST_BYTES + 1)  # one body over the bytes bound
    await settle()
    assert ran == [*range(MOST + 3), -1]  # everything before it too


async def test_the_oldest_waits_no_longer_than_its_bound(clock: Clock) -> None:
    bg, ran = Background(), []

    async def work(i: int) -> None:
        ran.append(i)

    bg.arrived()
    bg.start(work(0))
    clock.now += MOST_SECONDS / 2
    bg.start(work(1))
    clock.now += MOST_SECONDS / 2
    bg.arrived()  # requests keep arriving
    await settle()
    assert ran == [0]
    clock.now += MOST_SECONDS / 2
    bg.arrived()
    await settle()
    assert ran == [0, 1]


async def test_drain_runs_what_waits_and_a_failure_stops_nothing(clock: Clock) -> None:
    bg, ran = Background(), []

    async def work(i: int) -> None:
        if i == 1:
            raise RuntimeError("broke")
        ran.append(i)

    bg.arrived()
    for i in range(3):
        bg.start(work(i))
    await bg.drain()
    assert ran == [0, 2]
    bg.start(work(3))  # after a drain, work waits for quiet again
    await settle()
    assert ran == [0, 2]
    clock.now += QUIET
    await settle()
    assert ran == [0, 2, 3]
