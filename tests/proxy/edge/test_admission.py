"""The one admission of bodies (proxy/edge/admission.py): a large body is counted against the
memory budget while it is in its CPU phase, a small one is not; and the app, while it runs,
lets worker threads hold the interpreter only briefly while the event loop waits
(proxy/request/planning/off_loop.py: ``interpreter_shared``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.types import Message

from proxy.app import create_app
from proxy.config.settings import Limits, load_settings
from proxy.edge.admission import Admission
from proxy.observe import memory
from proxy.observe.memory import IN_FLIGHT_FACTOR, MIB, MemoryBudget
from proxy.request.planning.off_loop import SWITCH_INTERVAL


def posted(body: bytes, read: list[bytes] | None = None) -> Request:
    """A POST of ``body`` with its length; ``read``: where to note that it was read."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        if read is not None:
            read.append(body)
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    return Request(scope, receive)


async def test_a_teams_next_large_body_waits_unread() -> None:
    """Its length says it is large: it waits for its team's slot before a byte of it is read
    (a key's uploads in parallel are not held whole at once); another team's is read."""
    admission = Admission(Limits(large_body_bytes=1024, large_bodies_per_team=1))
    bodies = [b'{"n": "' + bytes([65 + k]) * 2000 + b'"}' for k in range(3)]
    read: list[bytes] = []
    release = asyncio.Event()

    async def hold(body: bytes, team: str, wait: bool) -> None:
        async with admission.admit(posted(body, read), team):
            if wait:
                await release.wait()

    first = asyncio.create_task(hold(bodies[0], "a", True))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(hold(bodies[1], "a", False))
    other = asyncio.create_task(hold(bodies[2], "b", False))
    await asyncio.sleep(0.01)
    assert read == [bodies[0], bodies[2]]  # team a's second is not read yet
    release.set()
    await asyncio.gather(first, second, other)
    assert read == [bodies[0], bodies[2], bodies[1]]


@pytest.mark.parametrize(("size", "counted"), [(100, 0), (4096, 4096 * IN_FLIGHT_FACTOR)])
async def test_a_large_body_counts_against_the_budget_while_admitted(
    monkeypatch: pytest.MonkeyPatch, size: int, counted: int
) -> None:
    monkeypatch.setattr(memory, "resident", lambda: 300 * MIB)
    admission = Admission(Limits(large_body_bytes=1024))
    admission.memory = MemoryBudget(768)
    admission.memory.measure()
    body = b'{"text": "' + b"x" * (size - 12) + b'"}'
    async with admission.admit(posted(body), "team") as read:
        assert read == body
        assert admission.memory.in_flight == counted
        assert admission.memory.caches == 468 * MIB - counted
    assert admission.memory.in_flight == 0 and admission.memory.caches == 468 * MIB


async def test_worker_threads_hold_the_interpreter_briefly_while_the_app_runs(
    tmp_path: Path,
) -> None:
    before = sys.getswitchinterval()
    assert before != SWITCH_INTERVAL
    app = create_app(load_settings(None, data_dir=str(tmp_path)))
    async with app.router.lifespan_context(app):
        assert sys.getswitchinterval() == SWITCH_INTERVAL
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            assert (await client.get("/health")).status_code == 200
    assert sys.getswitchinterval() == before
