"""proxy/windows/truncation.py: a silent truncation told from an answer's usage, and what is
never taken for one."""

from __future__ import annotations

from proxy.windows.calibration import LOW, Sample
from proxy.windows.truncation import MIN_READ, RecentUsage, short_of_growth, short_of_text


def test_a_count_far_under_what_the_text_could_count_is_a_cut() -> None:
    assert short_of_text(Sample(theirs=4000, ours=12000, hidden=0, messages=40), LOW)
    # Under the proxy's count, as any other tokenizer's may be: not a cut.
    assert not short_of_text(Sample(theirs=7000, ours=12000, hidden=0, messages=40), LOW)
    # Hidden tokens (signatures, encrypted reasoning) may cost the upstream nothing.
    assert not short_of_text(Sample(theirs=4000, ours=12000, hidden=6000, messages=40), LOW)


def test_a_usage_that_counts_nothing_is_no_cut() -> None:
    assert not short_of_text(Sample(theirs=1, ours=12000), LOW)  # a mock's usage
    assert not short_of_text(Sample(theirs=MIN_READ - 1, ours=12000), LOW)


def test_a_conversation_that_grew_while_the_count_did_not_was_cut() -> None:
    """Ollama at num_ctx 8192: the last whole read was 7,900 of a prompt the proxy counted at
    9,900; the next, 3,200 more, was cut back to 8,100."""
    before = Sample(theirs=7900, ours=9900, messages=20)
    cut = Sample(theirs=8100, ours=13100, messages=22)
    whole = Sample(theirs=10400, ours=13100, messages=22)
    assert short_of_growth(cut, LOW, before)
    assert not short_of_growth(whole, LOW, before)
    assert not short_of_text(cut, LOW)  # the ratio alone could not tell


def test_a_fixed_cost_per_request_is_no_cut() -> None:
    """An upstream that adds 340 tokens to every request: a small prompt's ratio runs high, and
    the next one's growth at that ratio would overshoot; growth is judged at the floor rate."""
    before = Sample(theirs=790, ours=500, messages=3)
    grown = Sample(theirs=1240, ours=1000, messages=5)
    assert not short_of_growth(grown, LOW, before)


def test_a_prompt_that_did_not_grow_is_not_judged_by_growth() -> None:
    before = Sample(theirs=7900, ours=9900, messages=20)
    trimmed = Sample(theirs=5000, ours=9000, messages=12)  # the proxy cut it
    assert not short_of_growth(trimmed, LOW, before)
    assert not short_of_growth(Sample(theirs=5000, ours=9000, messages=21), LOW, None)


def test_recent_usage_keeps_the_last_read_of_recent_conversations() -> None:
    recent = RecentUsage(size=2)
    a, b = Sample(theirs=900, ours=1000), Sample(theirs=1900, ours=2000)
    assert recent.swap("one", a) is None
    assert recent.swap("one", b) is a
    recent.swap("two", a)
    recent.swap("three", a)  # past its size: the oldest goes
    assert recent.swap("one", None) is None


def test_growth_says_nothing_when_the_view_hides_much() -> None:
    """Anthropic counts the newest thinking and drops earlier turns': a thinking-heavy prompt's
    count may grow less than its text did without any cut."""
    before = Sample(theirs=821, ours=5455, hidden=5054, messages=9)
    after = Sample(theirs=967, ours=1034, hidden=152, messages=17)
    assert not short_of_growth(after, LOW, before)
