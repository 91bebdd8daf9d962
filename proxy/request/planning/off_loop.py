"""Counting and fitting off the event loop, for a body with much that is new, or a large one.

Counting and fitting go to a worker thread only for a body with ``INLINE_BYTES`` or more that
its conversation's last request did not send (``WireRequest.fresh``): tokenizing them is work
that releases the interpreter (tiktoken drops the GIL), so the event loop serves other
requests meanwhile. The rest of the work (cache hits, the engine's passes) is Python, which
holds the interpreter wherever it runs, and in a worker it ran at half speed here (a warm
128k-token trimmed request: count 0.8 ms inline, 1.3 ms in a worker; fit 1.4 ms and 2.9 ms;
bench/speed_before.md); the thread's round trip is paid on top. An agent's request, whose
history was all sent before, is counted and fitted on the event loop.

A body of ``LARGE_BYTES`` or more goes to a worker thread whatever it reuses (``work_of``):
the caches that make the reused part cheap are bounded (strategies/bounded_memory.py) and such
a body can outgrow them, and even their hits cost it a pass per message. A 32 MiB
conversation of 25,000 turns, all sent before, held the event loop for up to 1.1 s while
its 12,500 user messages were read for standing rules again, and another team's small
requests waited behind it (bench/hostile.py). In a worker, Python work gives the interpreter
back every switch interval.

The switch interval is how long a thread may hold the interpreter while another waits for it:
CPython's default is 5 ms, and every time the event loop wakes (a socket ready, a timer) it
waits up to that long for each worker thread ahead of it. Two 32 MiB bodies fitted in worker
threads held another team's small requests for 117 ms at p99 (`python -m bench --only hostile`);
with ``SWITCH_INTERVAL`` (0.5 ms, set while the app runs: ``interpreter_shared``) 45 ms, the
large bodies served at the same rate. Only threads that contend switch more often: a proxy with
no large body in flight runs as before.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from proxy.wire import WireRequest

T = TypeVar("T")

INLINE_BYTES = 64 * 1024
LARGE_BYTES = 1024 * 1024  # limits.large_body_bytes' default: a body parsed off the loop
SWITCH_INTERVAL = 0.0005  # seconds: see the module's docstring


@contextmanager
def interpreter_shared(interval: float = SWITCH_INTERVAL) -> Iterator[None]:
    """The interpreter's switch interval at ``interval`` while the block runs (the app's
    life), then as it was."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def work_of(req: WireRequest) -> int:
    """Bytes of ``req`` its counting and fitting may read afresh, for ``off_loop``: the ones
    its conversation's last request did not send, or all of a ``LARGE_BYTES`` body."""
    return len(req.body) if len(req.body) >= LARGE_BYTES else req.fresh


async def off_loop(fresh: int, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, in a worker thread when ``fresh`` (bytes of text that may need
    reading afresh: ``work_of``) is ``INLINE_BYTES`` or more."""
    if fresh < INLINE_BYTES:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
