"""proxy/windows/bounds.py: a window learned without figures, narrowed between the largest need
taken and the smallest refused."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.windows.bounds import CLOSE, MAX_REFUSALS, Bounds


def test_a_refusal_bounds_the_window_and_the_retry_goes_at_what_was_taken() -> None:
    b = Bounds()
    assert b.accept(20_000) and b.window() is None  # nothing refused: nothing bounds it
    assert b.refuse(26_000)
    assert b.safe() == 20_000  # the retry goes at what the upstream took
    assert b.window() == 23_000  # the next requests probe the middle
    assert not b.refuse(30_000)  # a larger refusal says nothing new


def test_probes_narrow_the_gap_until_it_closes() -> None:
    b = Bounds()
    b.accept(20_000)
    b.refuse(26_000)
    b.accept(23_000)  # the probe was taken
    assert b.window() == 24_500
    b.refuse(24_500)  # this one was not
    assert (b.accepted, b.refused, b.refusals) == (23_000, 24_500, 2)
    assert b.window() == 23_750
    b.accept(24_100)
    assert b.settled and b.window() == 24_100  # within CLOSE of the refused need


def test_probing_stops_after_the_refusals_it_may_cost() -> None:
    b = Bounds()
    b.accept(10_000)
    for need in (40_000, 25_000, 17_500):
        b.refuse(need)
    assert b.refusals == MAX_REFUSALS and b.settled
    assert b.window() == 10_000  # what was taken, from now on


def test_a_refusal_below_what_was_taken_says_the_window_shrank() -> None:
    b = Bounds()
    b.accept(30_000)
    b.refuse(32_000)
    b.refuse(20_000)  # a server restarted with less
    assert b.accepted is None and b.safe() is None and b.window() == 10_000


def test_a_need_taken_above_the_refused_one_does_not_undo_the_refusal() -> None:
    b = Bounds()
    b.accept(10_000)
    b.refuse(12_000)
    assert not b.accept(12_100)  # the counts' noise, or a window that grew: the refusal stands
    assert not b.accept(20_000)
    assert (b.refused, b.accepted) == (12_000, 10_000)


def test_never_below_the_largest_prompt_taken() -> None:
    """A figure-free refusal of a need the upstream already took a larger prompt than is the
    proxy's miscount (content it cannot count), not the window: not believed, unless the
    upstream's own figures say so (a silent truncation's usage)."""
    b = Bounds()
    b.accept(9_000, prompt=8_000)
    assert not b.refuse(100)  # one caller's request, counted at 100
    assert b.window() is None and b.largest == 8_000
    assert b.refuse(12_000)
    assert b.window() is not None and b.window() >= 8_000  # type: ignore[operator]
    b2 = Bounds(refused=20_000, accepted=None, refusals=1, largest=15_000)
    assert b2.window() == 15_000  # half of what was refused would be below what it took
    assert b2.refuse(6_000, sure=True) and b2.largest is None and b2.window() == 3_000


def test_a_request_past_the_refusal_taken_heals_it() -> None:
    b = Bounds()
    b.accept(10_000, prompt=9_000)
    b.refuse(12_000)
    assert not b.heal(11_000, 10_500)  # below what was refused: disproves nothing
    assert b.heal(20_000, 19_000)  # a window that grew, or a wrong refusal
    assert (b.refused, b.accepted, b.refusals, b.largest) == (None, 20_000, 0, 19_000)
    assert b.window() is None


def test_what_it_says_of_itself() -> None:
    b = Bounds()
    b.accept(1000)
    b.refuse(2000)
    assert "refused 2000, took 1000" in b.describe() and "narrowing" in b.describe()


@settings(max_examples=300, deadline=None)
@given(
    window=st.integers(2_000, 300_000),
    start=st.integers(500, 2_000),
    steps=st.lists(st.integers(50, 4_000), min_size=20, max_size=120),
)
def test_a_growing_conversation_is_refused_at_most_a_few_times(
    window: int, start: int, steps: list[int]
) -> None:
    """A conversation grows by ``steps`` against a strict upstream that takes a need up to
    ``window`` and states no figures. Each request is fitted to the window in force (trimmed
    to it, or sent whole when it fits); a refused one is retried at what the upstream took.
    However it grows: at most ``MAX_REFUSALS`` refusals, nothing forwarded twice refused,
    and the window in force never above a need that was refused."""
    b = Bounds()
    size, refusals = start, 0
    b.accept(start)  # the conversation's first request
    for step in steps:
        size += step
        limit = b.window()
        need = size if limit is None else min(size, limit)
        if need > window:
            refusals += 1
            b.refuse(need)
            retry = b.safe()
            assert retry is not None and retry <= window  # the retry is taken
            b.accept(retry)
        else:
            b.accept(need)
        current = b.window()
        assert current is None or b.refused is None or current < b.refused
    assert refusals <= MAX_REFUSALS
    if b.settled and b.refusals < MAX_REFUSALS:
        assert b.refused is not None and b.accepted is not None
        assert b.refused - b.accepted <= max(64, CLOSE * b.refused)
