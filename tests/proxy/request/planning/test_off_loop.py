"""Counting and fitting go to a worker thread only for a body with much that is new, or a
large one; the interpreter's switch interval is shared while the app runs, then restored."""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace
from typing import Any

from proxy.request.planning.off_loop import (
    INLINE_BYTES,
    LARGE_BYTES,
    SWITCH_INTERVAL,
    interpreter_shared,
    off_loop,
    work_of,
)


def where(*args: Any, **kwargs: Any) -> tuple[int, tuple[Any, ...], dict[str, Any]]:
    return threading.get_ident(), args, kwargs


async def test_little_new_work_runs_on_the_loop_and_much_in_a_worker() -> None:
    here = threading.get_ident()
    inline = await off_loop(INLINE_BYTES - 1, where, 1, k=2)
    assert inline == (here, (1,), {"k": 2})
    thread, args, kwargs = await off_loop(INLINE_BYTES, where, 1, k=2)
    assert thread != here and args == (1,) and kwargs == {"k": 2}


def test_the_work_is_what_is_new_unless_the_body_is_large() -> None:
    small = SimpleNamespace(body=b"x" * 1000, fresh=10)
    assert work_of(small) == 10  # type: ignore[arg-type]
    large = SimpleNamespace(body=b"x" * LARGE_BYTES, fresh=0)
    assert work_of(large) == LARGE_BYTES  # type: ignore[arg-type]


def test_the_switch_interval_is_shared_then_restored() -> None:
    before = sys.getswitchinterval()
    with interpreter_shared():
        assert sys.getswitchinterval() == SWITCH_INTERVAL
    assert sys.getswitchinterval() == before
