"""The overflow retry loop (proxy/overflow/retry.py), driven by fake collaborators: a send that
overflows, a re-fit that records the budgets it is asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import orjson
import pytest

from proxy.config.settings import Trimming
from proxy.errors import ContextTooLarge, Invariant
from proxy.overflow import Overflow
from proxy.overflow.retry import Retrying, budget_after_overflow, send_with_overflow_retry
from proxy.request.planning.plan import Plan
from proxy.upstreams.forwarding import Reply
from proxy.windows.learned import Lesson
from strategies.budget import Budget

JSON = [("content-type", "application/json")]
SSE = [("content-type", "text/event-stream")]
OK = Reply(status=200, headers=JSON, body=b'{"ok": true}')


def overflow(limit: int, prompt: int) -> Reply:
    """An OpenAI overflow refusal that states the window and its count."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    return Reply(status=400, headers=JSON, body=orjson.dumps({"error": error}))


def figureless() -> Reply:
    error = {"message": "Your input exceeds the context window of this model.", "type": "x",
             "code": "context_length_exceeded"}  # fmt: skip
    return Reply(status=400, headers=JSON, body=orjson.dumps({"error": error}))


def first(tokens: int = 9000, window: int = 10_000) -> Plan:
    return Plan(
        body=b'{"first": 1}',
        budget=Budget(window=window, reserve=500, tools=0, margin=100),
        tokens_before=tokens,
        tokens_after=tokens,
        actions=["truncate_oldest"],
    )


class Fake:
    """The loop's collaborators: ``replies`` answered in turn, each refit recorded."""

    def __init__(self, replies: list[Reply], learned: int | None = None) -> None:
        self.replies, self.learned = replies, learned
        self.sent: list[Plan] = []
        self.budgets: list[Budget] = []
        self.lessons: list[Lesson] = []
        self.closed = 0

    async def send(self, plan: Plan) -> Reply:
        self.sent.append(plan)
        reply = self.replies.pop(0)

        async def close() -> None:
            self.closed += 1

        reply.closer = close
        return reply

    async def refit(self, budget: Budget) -> Plan:
        self.budgets.append(budget)
        fits = budget.messages - 10
        return Plan(
            body=f'{{"refit": {fits}}}'.encode(),
            budget=budget,
            tokens_before=9000,
            tokens_after=fits,
            actions=["truncate_oldest"],
        )

    def budget_for(self, window: int) -> Budget:
        return Budget(window=window, reserve=500, tools=0, margin=100)

    async def learn(self, lesson: Lesson, plan: Plan) -> int | None:
        self.lessons.append(lesson)
        return self.learned

    async def refused(self, plan: Plan, unknown: bool) -> tuple[int, int] | None:
        return None  # shrink by the settings' share

    def retrying(self) -> Retrying:
        return Retrying(
            send=self.send,
            refit=self.refit,
            budget_for=self.budget_for,
            learn=self.learn,
            refused=self.refused,
            recount=lambda: 9000,
        )


async def test_two_overflows_shrink_the_plan_twice_and_the_third_try_answers() -> None:
    fake = Fake([overflow(8000, 9100), figureless(), OK])
    reply, plan, retries = await send_with_overflow_retry(first(), fake.retrying(), Trimming())
    assert reply is OK and retries == 2
    assert fake.sent[0].body == b'{"first": 1}' and plan is fake.sent[2]
    # The stated window is learned and the original re-fitted below it (scaled by the
    # upstream's count against ours); then, with no figures, shrunk by the settings' share of
    # what was sent; each re-fit from the original, named once.
    assert fake.lessons[0].window == 8000 and fake.budgets[0].window < 8000
    shrunk = fake.sent[1].tokens_after * (1 - Trimming().overflow_shrink)  # type: ignore[operator]
    assert fake.budgets[1].messages == int(shrunk)
    assert plan.actions == ["truncate_oldest", "overflow-retry"]
    assert fake.closed == 2  # each refused reply closed before the next try


async def test_the_retries_stop_at_the_limit_and_the_last_refusal_stands() -> None:
    fake = Fake([figureless(), figureless(), figureless()])
    reply, plan, retries = await send_with_overflow_retry(
        first(), fake.retrying(), Trimming(max_overflow_retries=2)
    )
    assert retries == 2 and reply.status == 400 and len(fake.sent) == 3
    assert plan is fake.sent[2] and plan.actions == ["truncate_oldest", "overflow-retry"]


async def test_an_error_that_is_no_overflow_is_not_retried() -> None:
    busy = Reply(status=503, headers=JSON, body=b'{"error": {"message": "overloaded"}}')
    fake = Fake([busy])
    reply, plan, retries = await send_with_overflow_retry(first(), fake.retrying(), Trimming())
    assert (reply, plan, retries) == (busy, fake.sent[0], 0) and not fake.budgets


async def test_nothing_smaller_holds_it_the_upstreams_refusal_stands() -> None:
    fake = Fake([overflow(600, 9100)])  # a window smaller than the reserve and margin
    refusal = fake.replies[0]
    reply, plan, retries = await send_with_overflow_retry(first(), fake.retrying(), Trimming())
    assert reply is refusal and retries == 0 and plan is fake.sent[0]


async def test_a_stream_whose_first_event_is_an_overflow_is_peeked_and_retried() -> None:
    error = (
        b'data: {"error": {"message": "maximum context length is 8000 tokens. However, '
        b'your messages resulted in 9100 tokens", "code": "context_length_exceeded"}}\n\n'
    )

    async def events() -> AsyncIterator[bytes]:
        yield error

    fake = Fake([Reply(status=200, headers=SSE, stream=events()), OK])
    reply, _, retries = await send_with_overflow_retry(first(), fake.retrying(), Trimming())
    assert reply is OK and retries == 1 and fake.lessons[0].window == 8000


async def test_a_plan_with_no_budget_is_an_invariant_not_an_assert() -> None:
    with pytest.raises(Invariant):
        budget_after_overflow(
            Plan(body=b"", budget=None), Overflow(8000, 9000), Fake([]).budget_for, Trimming()
        )


async def test_a_refit_that_cannot_hold_what_must_be_kept_is_not_retried() -> None:
    fake = Fake([figureless()])

    async def refit(budget: Budget) -> Plan:
        raise ContextTooLarge("too large")

    do = fake.retrying()
    reply, _, retries = await send_with_overflow_retry(
        first(), replace(do, refit=refit), Trimming()
    )
    assert reply.status == 400 and retries == 0
