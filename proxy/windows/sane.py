"""The range a window may take, for every figure the proxy did not configure itself: what a
server states (discovery), what an overflow error states, what the store kept.

A figure outside it is no window: ``num_ctx`` of 300 digits (which raised OverflowError at the
calibration's float conversion, a 500 on every request of the model), 3.7 (which became 3, and
every request was refused), 1 or 1e300. Such a figure means "unknown", never an error.
"""

from __future__ import annotations

import math

MIN_WINDOW = 256  # below it no chat template and reply fit: a figure this small is a mistake
MAX_WINDOW = 100_000_000  # past every model's window by far; a larger figure is no window
MAX_DIGITS = 12  # a figure written with more digits than this is not parsed at all


def sane_window(value: object) -> int | None:
    """``value`` as a window: an integer (or a float that is one, such as 8192.0, or a string
    of digits) within ``MIN_WINDOW``..``MAX_WINDOW``; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or not text.isdigit() or len(text) > MAX_DIGITS:
            return None
        value = int(text)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int):
        return None
    return value if MIN_WINDOW <= value <= MAX_WINDOW else None
