from __future__ import annotations

from proxy.summaries.breaker import Breaker


def test_opens_after_max_failures_skips_once_then_half_opens() -> None:
    b = Breaker(3)
    for _ in range(3):
        assert b.allow()
        b.failure()
    assert b.state == "open"
    assert not b.allow()  # one cycle skipped
    assert b.state == "half-open"
    assert b.allow()
    b.failure()
    assert not b.allow()
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.failures == 0
