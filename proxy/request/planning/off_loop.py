"""Counting and fitting off the event loop, for a body with much that is new.

Counting and fitting go to a worker thread only for a body with ``INLINE_BYTES`` or more that
its conversation's last request did not send (``WireRequest.fresh``): tokenizing them is work
that releases the interpreter (tiktoken drops the GIL), so the event loop serves other
requests meanwhile. The rest of the work (cache hits, the engine's passes) is Python, which
holds the interpreter wherever it runs, and in a worker it ran at half speed here (a warm
128k-token trimmed request: count 0.8 ms inline, 1.3 ms in a worker; fit 1.4 ms and 2.9 ms;
bench/speed_before.md); the thread's round trip is paid on top. An agent's request, whose
history was all sent before, is counted and fitted on the event loop whatever its size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

INLINE_BYTES = 64 * 1024


async def off_loop(fresh: int, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, in a worker thread when ``fresh`` (bytes of text that may need
    tokenizing) is ``INLINE_BYTES`` or more."""
    if fresh < INLINE_BYTES:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
