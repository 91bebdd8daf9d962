"""proxy/windows/sane.py: which figures are windows."""

from __future__ import annotations

import pytest

from proxy.windows.sane import MAX_WINDOW, MIN_WINDOW, sane_window


@pytest.mark.parametrize(
    ("value", "window"),
    [
        (8192, 8192),
        (8192.0, 8192),
        ("131072", 131072),
        (MIN_WINDOW, MIN_WINDOW),
        (MAX_WINDOW, MAX_WINDOW),
        (3.7, None),
        (1, None),
        (MIN_WINDOW - 1, None),
        (MAX_WINDOW + 1, None),
        (1e300, None),
        (float("inf"), None),
        (float("nan"), None),
        (10**300, None),
        ("9" * 300, None),
        ("８１９２", None),  # fullwidth digits
        ("8192.5", None),
        (True, None),
        (None, None),
        ([8192], None),
    ],
)
def test_a_window_is_an_integer_in_the_sane_range(value: object, window: int | None) -> None:
    assert sane_window(value) == window
