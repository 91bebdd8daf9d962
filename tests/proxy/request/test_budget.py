"""The one budget rule, and the budget after an upstream overflow."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.config.settings import load_settings
from proxy.errors import ContextTooLarge
from proxy.overflow import Overflow
from proxy.overflow.retry import budget_after_overflow, should_retry
from proxy.request.budget import budget_for
from proxy.request.planning.plan import Plan
from proxy.windows.models import build_models
from proxy.wire import WireRequest as Request

SETTINGS = load_settings(
    None,
    upstreams={"u": {"base_url": "http://u/v1"}},
    models={"m": {"context_window": 64000, "tokenizer": "o200k_base"}},
)


def request(**payload: Any) -> Request:
    spec = build_models(SETTINGS).resolve("m")
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], **payload}
    return Request(body=b"", payload=body, spec=spec, window=64000, policy=spec.policy)


def sent(req: Request, tokens: int) -> Plan:
    return Plan(
        body=b"",
        budget=budget_for(req, 64000, SETTINGS.trimming),
        tokens_before=tokens,
        tokens_after=tokens,
    )


def after(req: Request, plan: Plan, overflow: Overflow) -> Any:
    rule = lambda window: budget_for(req, window, SETTINGS.trimming)  # noqa: E731
    return budget_after_overflow(plan, overflow, rule, SETTINGS.trimming)


def test_the_reserve_follows_the_window() -> None:
    req = request()
    assert budget_for(req, 64000, SETTINGS.trimming).reserve == 4096
    assert budget_for(req, 2048, SETTINGS.trimming).reserve == 512  # a quarter of a small one
    assert budget_for(request(max_tokens=100), 2048, SETTINGS.trimming).reserve == 100


def test_a_much_smaller_real_window_is_budgeted_by_the_same_rules() -> None:
    req = request()
    budget, learned = after(req, sent(req, 18801), Overflow(limit=2048, prompt=18801))
    assert learned == 2048
    assert budget.window == 2048 and budget.reserve == 512
    assert 0 < budget.messages < 2048 - 512


def test_a_count_that_differs_rescales_the_window() -> None:
    req = request()
    budget, learned = after(req, sent(req, 10000), Overflow(limit=8000, prompt=13000))
    assert learned == 8000 * 10000 // 13000
    assert budget.messages < 10000


def test_without_numbers_the_messages_shrink_by_the_factor() -> None:
    req = request()
    budget, learned = after(req, sent(req, 10000), Overflow())
    assert learned is None
    assert budget.messages == 8500


def test_no_room_left_is_context_too_large() -> None:
    req = request(max_tokens=3000)  # the client's own reserve is over the real window
    with pytest.raises(ContextTooLarge):
        after(req, sent(req, 5000), Overflow(limit=2048, prompt=5000))


@pytest.mark.parametrize(
    ("overflow", "budget", "retries", "expected"),
    [
        (None, True, 0, False),
        (Overflow(2048, 3000), False, 0, False),
        (Overflow(2048, 3000), True, 2, False),
        (Overflow(2048, 3000), True, 1, True),
        (Overflow(), True, 0, True),
    ],
)
def test_should_retry_table(
    overflow: Overflow | None, budget: bool, retries: int, expected: bool
) -> None:
    req = request()
    plan = sent(req, 3000) if budget else Plan(body=b"", budget=None)
    assert should_retry(overflow, plan, retries, limit=2) is expected
