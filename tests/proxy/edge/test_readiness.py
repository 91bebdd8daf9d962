"""Readiness (proxy/edge/readiness.py): unready until the store has answered and what else it
waits for is done, unready again from the moment a shutdown signal arrives."""

from __future__ import annotations

import asyncio
import signal
from types import FrameType

import pytest

from proxy.edge import readiness as module
from proxy.edge.readiness import Readiness


async def test_unready_until_the_store_answers_then_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([False, False, True])
    asked = 0

    async def connect() -> bool:
        nonlocal asked
        asked += 1
        return next(answers)

    ready = Readiness()
    module.RETRY_SECONDS, saved = 0.01, module.RETRY_SECONDS
    try:
        await ready.start(connect)
        assert ready.report() == (
            503,
            {"status": "starting", "waiting_for": "the checkpoint store"},
        )
        for _ in range(100):
            if ready.connected:
                break
            await asyncio.sleep(0.01)
    finally:
        module.RETRY_SECONDS = saved
    assert asked == 3
    assert ready.report() == (200, {"status": "ready"})
    await ready.stop()
    assert ready.report() == (503, {"status": "draining"})


async def test_unready_while_what_it_also_waits_for_is_not_done() -> None:
    loaded = False

    async def connect() -> bool:
        return True

    ready = Readiness()
    ready.also("litellm", lambda: loaded)
    await ready.start(connect)
    assert ready.report() == (503, {"status": "starting", "waiting_for": "litellm"})
    loaded = True
    ready.note = "checkpoints disabled: no disk"
    assert ready.report() == (200, {"status": "ready", "note": "checkpoints disabled: no disk"})


def test_a_shutdown_signal_turns_it_unready_and_reaches_the_servers_handler() -> None:
    """The server's own handler (uvicorn's) is kept and called after (pytest runs tests in
    the main thread, where handlers may be set)."""
    received: list[int] = []

    def servers(sig: int, frame: FrameType | None) -> None:
        received.append(sig)

    saved = {sig: signal.getsignal(sig) for sig in module.SHUTDOWN_SIGNALS}
    try:
        for sig in module.SHUTDOWN_SIGNALS:
            signal.signal(sig, servers)
        ready = Readiness()
        ready.connected = True
        ready.on_shutdown_signal()
        assert ready.report()[0] == 200
        signal.raise_signal(signal.SIGTERM)
        assert ready.report() == (503, {"status": "draining"})
        assert received == [signal.SIGTERM]
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
