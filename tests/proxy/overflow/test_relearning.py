"""A learned window, tried again (proxy/overflow/relearning.py): with a real planner and the
models' windows, a request a lesson holds back is let through past it when it is due, and a
refusal that rests on a lesson says so."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.datastructures import Headers

from proxy.config.settings import Settings, load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.errors import ContextTooLarge
from proxy.overflow.relearning import RETRIED, Planning, learned_note, planned
from proxy.request.planning.planner import Planner
from proxy.windows.models import build_models
from proxy.wire import WireRequest
from tests.proxy.overflow.test_fallbacks import MODELS

LESSON = 3000  # the window an overflow taught, under the configured 200,000


class Proxy:
    def __init__(self, **trimming: Any) -> None:
        self.settings = _with(trimming)
        self.models = build_models(self.settings)
        self.models.learned.learn("default", "bigger", LESSON, "the upstream stated it")
        planner = Planner(settings=self.settings, compactor=None)
        self.with_ = Planning(planner=planner, models=self.models, trimming=self.settings.trimming)

    async def build(self, body: bytes) -> WireRequest:
        who = Principal(
            team="default", config=self.settings.teams["default"], forward_client_auth=False
        )
        return build_request(body, Headers(), self.settings, self.models, who)

    async def plan(self, words: int, turns: int = 1, last: int = 1) -> tuple[Any, Any, bool]:
        messages: list[dict[str, str]] = []
        for i in range(turns):
            messages += [{"role": "user", "content": f"q{i} " + "word " * words},
                         {"role": "assistant", "content": "ok"}]  # fmt: skip
        messages.append({"role": "user", "content": "last " * last})
        body = orjson.dumps({"model": "bigger", "messages": messages})
        return await planned(self.with_, await self.build(body), body, self.build)


def _with(trimming: dict[str, Any]) -> Settings:
    return load_settings(
        None,
        upstreams={"u": {"base_url": "http://u/v1"}},
        models=MODELS,
        policies={"default": {"summarize": False}},
        trimming=trimming,
    )


async def test_a_request_the_lesson_holds_back_is_let_through_at_the_nth() -> None:
    proxy = Proxy(learned_retry_requests=2, learned_retry_seconds=0)
    req, plan, trial = await proxy.plan(400, turns=20)  # about 8,000 tokens
    assert not trial and RETRIED not in plan.actions and plan.tokens_after <= LESSON
    req, plan, trial = await proxy.plan(400, turns=20)
    assert trial and plan.actions[-1] == RETRIED
    assert plan.tokens_after == plan.tokens_before  # planned by the configured window: whole
    assert req.window is not None and req.window > LESSON


async def test_one_the_lesson_does_not_hold_back_is_not_let_through() -> None:
    proxy = Proxy(learned_retry_requests=1, learned_retry_seconds=0)
    _, plan, trial = await proxy.plan(10)
    assert not trial and plan.actions == []


async def test_a_refusal_that_rests_on_a_lesson_says_which_and_how_to_forget_it() -> None:
    proxy = Proxy(learned_retry_requests=0, learned_retry_seconds=0)  # never tried again
    with pytest.raises(ContextTooLarge) as refused:
        await proxy.plan(10, last=5000)  # the newest message alone is over the window
    message = refused.value.message
    assert f"the window of bigger for default is {LESSON} tokens" in message
    assert "it is never retried" in message
    assert "contextwarden windows forget bigger --team default" in message


async def test_the_refusal_is_let_through_when_due() -> None:
    proxy = Proxy(learned_retry_requests=1, learned_retry_seconds=0)
    _, plan, trial = await proxy.plan(10, last=5000)
    assert trial and plan.actions[-1] == RETRIED


def test_no_lesson_no_note() -> None:
    proxy = Proxy()
    spec = proxy.models.resolve("big")
    req = WireRequest(
        body=b"", payload={"messages": []}, spec=spec, window=100_000, policy=spec.policy
    )
    assert learned_note(proxy.models, proxy.settings.trimming, req) is None
    spec = proxy.models.resolve("bigger")
    req = WireRequest(
        body=b"", payload={"messages": []}, spec=spec, window=LESSON, policy=spec.policy
    )
    note = learned_note(proxy.models, proxy.settings.trimming, req)
    assert note is not None and "after 3600 s or 100 requests held back" in note
