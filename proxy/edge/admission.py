"""What one request may cost the proxy, whatever its body: the one admission every route that
reads a body goes through (``Admission.admit``), before anything parses it.

A body under the byte limit can still be expensive: a million tiny Responses items is 30 MB of
JSON whose parsing alone holds the interpreter for over a second, and whose view and count took
28 s; four million one-letter strings in a completions ``prompt`` are two JSON containers but
four million prompts to cut. Three such bodies in flight stalled every other team. So:

- **Bytes.** A body is read up to ``limits.max_body_bytes`` (a declared length over it is a 413
  before a byte is read).
- **Nodes.** A JSON body may hold at most ``limits.max_json_nodes`` values, *every* value
  counted: objects, arrays and each leaf (string, number, boolean, null), in arrays too. The
  count's cheap bound (one plus the commas, braces and brackets in the raw bytes: each value
  but the first follows a comma or opens a container) runs first; when it is over the cap
  (punctuation inside strings counts too, so prose can be), the exact count runs in a worker
  *process*, which parses without holding this process's interpreter: the event loop keeps
  serving. A body over the cap is a 413 that says so.
- **A slot per team.** A body of ``limits.large_body_bytes`` or more takes one of its team's
  ``limits.large_bodies_per_team`` slots for its CPU phase (node count, parse, view, the first
  plan; not the wait for the upstream); the team's next large body waits. A body whose
  ``content-length`` says it is large takes the slot before it is read: the team's next one
  waits unread.
- **Memory.** A large body counts against ``limits.memory_budget_mb`` while it is in its CPU
  phase, and waits when the large bodies in flight would take the process past it
  (proxy/observe/memory.py: ``MemoryBudget.holding``).
- **Off the event loop.** A large body's parse, view and plan run in a worker thread
  (``Admission.run``), so the event loop gets the interpreter back between their steps.

``tests/security/test_route_admission.py`` lists the app's routes and fails for any route that
reads a body outside ``admit``.

Memory follows: a body's parse is bounded by its bytes and its node count. Both bounds are
per process (with replicas or ``serve --workers``, per replica): they guard this process's CPU
and memory, not a team's share of the fleet (which the store's quotas do).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import orjson
from starlette.requests import ClientDisconnect, Request

from proxy.config.settings import Limits
from proxy.errors import BadRequest, PayloadTooLarge
from proxy.observe.memory import MemoryBudget

T = TypeVar("T")


def json_nodes(body: bytes, stop: int | None = None) -> int:
    """Values in a JSON document, every leaf counted (run in the worker process); -1 when it
    is not JSON (the request path's own parse then says why). Counting stops past ``stop``."""
    try:
        root = orjson.loads(body)
    except orjson.JSONDecodeError:
        return -1
    count, stack = 1, [root]
    while stack and (stop is None or count <= stop):
        node = stack.pop()
        if isinstance(node, dict):
            count += len(node)
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            count += len(node)
            stack.extend(v for v in node if isinstance(v, dict | list))
    return count


# Every byte but the three that can open a value after the root: what ``node_bound`` deletes.
_NOT_OPENERS = bytes(b for b in range(256) if b not in b",{[")


def node_bound(body: bytes, step: int = 1 << 20) -> int:
    """An upper bound on ``json_nodes``: every value but the root follows a comma or opens an
    object or array. One pass deletes every other byte (a third of three ``count`` passes' time
    on a resent agent body); a mebibyte at a time: each pass is one call that holds the
    interpreter, and over 32 MiB whole-body passes held it for over 100 ms."""
    if len(body) <= step:
        return 1 + len(body.translate(None, _NOT_OPENERS))
    bound = 1
    for start in range(0, len(body), step):
        bound += len(body[start : start + step].translate(None, _NOT_OPENERS))
    return bound


def looks_like_json(body: bytes, content_type: str | None) -> bool:
    """Whether a body is counted as JSON: its type says so, or it opens like a JSON document
    (the fitted routes parse a body whatever its declared type)."""
    if content_type is not None and "json" in content_type.lower():
        return True
    return body.lstrip()[:1] in (b"{", b"[")


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes is over the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body is over the {limit}-byte limit")
            chunks.append(chunk)
    except ClientDisconnect:
        # An aborted upload: nobody reads the answer, and it is no error of the proxy's (no
        # traceback in the log for each one).
        raise BadRequest("the client closed the connection before its body was read") from None
    return b"".join(chunks)


class Admission:
    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._pool: ProcessPoolExecutor | None = None
        self.memory: MemoryBudget | None = None  # set once the runtime has made it

    def large(self, body: bytes) -> bool:
        return len(body) >= self._limits.large_body_bytes

    @asynccontextmanager
    async def admit(self, request: Request, team: str) -> AsyncIterator[bytes]:
        """The request's body, read within the byte limit and, when it is JSON, counted
        against the node cap; a large body holds a slot of ``team``'s while the block runs
        (its CPU phase: parse, view, the first plan)."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) >= self._limits.large_body_bytes:
            # A large body says so: its team's slot is taken before it is read, so one team's
            # uploads in parallel wait unread (the client's bytes stay in its socket) instead
            # of each being held whole at once (12 of one key's 32 MiB bodies took the process
            # to 1.3 GiB against a 768 MiB budget).
            async with self._team_slot(team):
                body = await read_body(request, self._limits.max_body_bytes)
                async with self._held(body):
                    yield await self._checked(request, body)
            return
        body = await read_body(request, self._limits.max_body_bytes)
        if not self.large(body):
            yield await self._checked(request, body)
            return
        async with self._team_slot(team), self._held(body):
            yield await self._checked(request, body)

    async def _checked(self, request: Request, body: bytes) -> bytes:
        if body and looks_like_json(body, request.headers.get("content-type")):
            await self._check(body)
        return body

    @asynccontextmanager
    async def _team_slot(self, team: str) -> AsyncIterator[None]:
        """One of ``team``'s ``limits.large_bodies_per_team`` slots for a large body's CPU
        phase (see the module docstring)."""
        slots = self._slots.get(team)
        if slots is None:
            slots = self._slots[team] = asyncio.Semaphore(self._limits.large_bodies_per_team)
        async with slots:
            yield

    @asynccontextmanager
    async def _held(self, body: bytes) -> AsyncIterator[None]:
        """A large body counted against the memory budget (``MemoryBudget.holding``)."""
        if self.memory is None or not self.large(body):
            yield
            return
        async with self.memory.holding(len(body)):
            yield

    async def _check(self, body: bytes) -> None:
        """413 when the body holds more JSON values than the limit."""
        cap = self._limits.max_json_nodes
        if len(body) <= cap:  # a value takes a byte at least
            return
        bound = await self.run(body, node_bound, body)
        if bound <= cap:
            return
        loop = asyncio.get_running_loop()
        nodes = await loop.run_in_executor(self._workers(), json_nodes, body, cap)
        if nodes > cap:
            raise PayloadTooLarge(
                f"the request body holds more than {cap} JSON values (objects, arrays, strings, "
                f"numbers; over the limit of limits.max_json_nodes)"
            )

    async def run(self, body: bytes, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` (parsing and viewing the body): in a worker thread for a large body,
        so the event loop's share of the interpreter stays while it runs."""
        if self.large(body):
            return await asyncio.to_thread(work, *args)
        return work(*args)

    async def elsewhere(self, body: bytes, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` in the worker process for a large body (``work`` must be a
        module-level function whose result is small: it comes back pickled), else inline.
        For work whose result the request needs only a little of, such as what a forwarded
        body names."""
        if not self.large(body):
            return work(*args)
        return await asyncio.get_running_loop().run_in_executor(self._workers(), work, *args)

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:  # started on first need: most proxies never need it
            context = multiprocessing.get_context("spawn")  # no fork of a threaded process
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
