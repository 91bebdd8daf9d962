"""What one request may cost the proxy, whatever its body: the admission step before parsing.

A body under the byte limit can still be expensive: a million tiny Responses items is 30 MB of
JSON whose parsing alone holds the interpreter for over a second, and whose view and count took
28 s. Three such bodies in flight stalled every other team. So, before a body is parsed:

- **A structural bound.** JSON objects and arrays (``{`` and ``[`` outside strings) are capped
  at ``limits.max_json_nodes``. Counting the brackets in the raw bytes is an upper bound that
  costs a few milliseconds even at the byte limit; when it is over the cap (brackets inside
  strings count too, so code-heavy text can be), the exact count runs in a worker *process*,
  which parses without holding this process's interpreter: the event loop keeps serving. A body
  over the cap is a 413 that says so.
- **Large bodies per team.** A body of ``limits.large_body_bytes`` or more takes one of its
  team's ``limits.large_bodies_per_team`` slots for its CPU phase (node count, parse, view, the
  first plan; not the wait for the upstream); the team's next large body waits. Its parsing and
  view run in a worker thread.

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

from proxy.config.settings import Limits
from proxy.edge.errors import PayloadTooLarge

T = TypeVar("T")


def json_nodes(body: bytes) -> int:
    """Objects and arrays in a JSON document (run in the worker process); -1 when it is not
    JSON (the request path's own parse then says why)."""
    try:
        root = orjson.loads(body)
    except orjson.JSONDecodeError:
        return -1
    count, stack = 0, [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            count += 1
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            count += 1
            stack.extend(v for v in node if isinstance(v, dict | list))
    return count


def bracket_bound(body: bytes) -> int:
    """An upper bound on ``json_nodes``: every object or array opens with a bracket."""
    return body.count(b"{") + body.count(b"[")


class Admission:
    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._pool: ProcessPoolExecutor | None = None

    def large(self, body: bytes) -> bool:
        return len(body) >= self._limits.large_body_bytes

    @asynccontextmanager
    async def slot(self, team: str, body: bytes) -> AsyncIterator[None]:
        """Held for a request's CPU phase (see the module docstring); only large bodies queue,
        per team."""
        if not self.large(body):
            yield
            return
        slots = self._slots.get(team)
        if slots is None:
            slots = self._slots[team] = asyncio.Semaphore(self._limits.large_bodies_per_team)
        async with slots:
            yield

    async def check(self, body: bytes) -> None:
        """413 when the body holds more JSON objects and arrays than the limit."""
        cap = self._limits.max_json_nodes
        if len(body) <= cap or bracket_bound(body) <= cap:  # a node takes a byte at least
            return
        nodes = await asyncio.get_running_loop().run_in_executor(self._workers(), json_nodes, body)
        if nodes > cap:
            raise PayloadTooLarge(
                f"the request body holds {nodes} JSON objects and arrays, over the limit of "
                f"{cap} (limits.max_json_nodes)"
            )

    async def run(self, body: bytes, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` (parsing and viewing the body): in a worker thread for a large body,
        so the event loop's share of the interpreter stays while it runs."""
        if self.large(body):
            return await asyncio.to_thread(work, *args)
        return work(*args)

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:  # started on first need: most proxies never need it
            context = multiprocessing.get_context("spawn")  # no fork of a threaded process
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
