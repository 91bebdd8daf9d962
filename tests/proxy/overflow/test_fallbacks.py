"""Context-window fallbacks (proxy/overflow/fallbacks.py): which model's plan is sent, with fake
plans by model and requests built as the edge builds them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.datastructures import Headers

from proxy.config.settings import Settings, load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.errors import ContextTooLarge, Forbidden
from proxy.overflow.fallbacks import loses, plan_with_fallbacks, reachable
from proxy.request.planning.plan import Plan
from proxy.windows.models import build_models
from proxy.wire import Credential, WireRequest
from strategies.budget import Budget

MODELS = {
    "small": {"context_window": 1000, "tokenizer": "o200k_base"},
    "big": {"context_window": 100_000, "tokenizer": "o200k_base"},
    "bigger": {"context_window": 200_000, "tokenizer": "o200k_base"},
}


def settings(**policy: Any) -> Settings:
    return load_settings(
        None,
        upstreams={"u": {"base_url": "http://u/v1"}},
        models=MODELS,
        policies={"default": {"summarize": False, **policy}},
    )


class Proxy:
    """Requests built from bodies, and a first plan per model: a plan dropping ``loss`` of
    10,000 tokens, or a refusal."""

    def __init__(self, plans: dict[str, float | None], **policy: Any) -> None:
        self.settings = settings(**policy)
        self.models = build_models(self.settings)
        self.plans = plans
        self.asked: list[tuple[str, bool]] = []  # (model, dry run)
        self.refused_models: set[str] = set()

    async def build(self, body: bytes) -> WireRequest:
        model = orjson.loads(body)["model"]
        if model in self.refused_models:
            raise Forbidden(f"not {model}")
        who = Principal(
            team="default", config=self.settings.teams["default"], forward_client_auth=False
        )
        return build_request(body, Headers(), self.settings, self.models, who)

    async def plan_first(self, req: WireRequest, dry_run: bool) -> Plan:
        self.asked.append((req.spec.name, dry_run))
        loss = self.plans[req.spec.name]
        if loss is None:
            raise ContextTooLarge(f"{req.spec.name} is too small")
        after = round(10_000 * (1 - loss))
        actions = ["truncate_oldest"] if loss else []
        return Plan(
            body=b"{}",
            budget=Budget(window=100_000, reserve=1000, tools=0, margin=100),
            tokens_before=10_000,
            tokens_after=after,
            actions=actions,
        )

    async def choose(self) -> tuple[WireRequest, Plan]:
        body = orjson.dumps({"model": "small", "messages": [{"role": "user", "content": "hi"}]})
        req = await self.build(body)
        return await plan_with_fallbacks(req, body, self.build, self.plan_first)


async def test_a_request_that_fits_its_own_model_stays_on_it() -> None:
    proxy = Proxy({"small": 0.0, "big": 0.0}, fallbacks=["big"])
    req, plan = await proxy.choose()
    assert req.spec.name == "small" and plan.actions == []
    assert proxy.asked == [("small", False)]


async def test_one_too_large_for_its_model_goes_to_the_first_fallback_that_fits() -> None:
    proxy = Proxy({"small": None, "big": None, "bigger": 0.0}, fallbacks=["big", "bigger"])
    req, plan = await proxy.choose()
    assert req.spec.name == "bigger" and plan.actions == ["fallback small->bigger"]
    assert proxy.asked == [("small", False), ("big", False), ("bigger", False)]


async def test_a_fallback_the_team_may_not_use_is_passed_over() -> None:
    proxy = Proxy({"small": None, "big": 0.0, "bigger": 0.0}, fallbacks=["big", "bigger"])
    proxy.refused_models.add("big")
    req, _ = await proxy.choose()
    assert req.spec.name == "bigger"


async def test_when_none_fits_the_own_models_refusal_stands() -> None:
    proxy = Proxy({"small": None, "big": None}, fallbacks=["big"])
    with pytest.raises(ContextTooLarge, match="small is too small"):
        await proxy.choose()


async def test_a_loss_over_the_share_is_chosen_on_dry_runs_then_planned_for_real() -> None:
    proxy = Proxy({"small": 0.8, "big": 0.1}, fallbacks=["big"], fallback_on_loss=0.5)
    req, plan = await proxy.choose()
    assert req.spec.name == "big" and plan.actions[-1] == "fallback small->big"
    assert proxy.asked == [("small", True), ("big", True), ("big", False)]


async def test_a_loss_under_the_share_keeps_the_own_model() -> None:
    proxy = Proxy({"small": 0.3, "big": 0.0}, fallbacks=["big"], fallback_on_loss=0.5)
    req, _ = await proxy.choose()
    assert req.spec.name == "small" and proxy.asked == [("small", True), ("small", False)]


async def test_a_fallback_that_loses_as_much_is_passed_over() -> None:
    proxy = Proxy({"small": 0.8, "big": 0.9}, fallbacks=["big"], fallback_on_loss=0.5)
    req, _ = await proxy.choose()
    assert req.spec.name == "small" and proxy.asked[-1] == ("small", False)


def test_loses_is_the_share_of_tokens_dropped() -> None:
    budget = Budget(window=1000, reserve=10, tools=0, margin=0)
    assert (
        loses(
            Plan(
                body=b"",
                budget=budget,
                tokens_before=1000,
                tokens_after=250,
                actions=["truncate_oldest"],
            )
        )
        == 0.75
    )
    assert (
        loses(Plan(body=b"", budget=budget, tokens_before=1000, tokens_after=1000, actions=[]))
        == 0.0
    )  # sent whole
    assert (
        loses(
            Plan(
                body=b"",
                budget=None,
                tokens_before=None,
                tokens_after=None,
                actions=["unknown-window"],
            )
        )
        == 0.0
    )


async def test_a_callers_credential_reaches_no_other_upstream_without_its_own_key() -> None:
    proxy = Proxy({})
    body = orjson.dumps({"model": "small", "messages": [{"role": "user", "content": "hi"}]})
    req, alt = await proxy.build(body), await proxy.build(body.replace(b"small", b"big"))
    req.credential, req.addressed = Credential("sk-own", "authorization"), "u"
    assert reachable(req, alt) and alt.credential == req.credential  # the same upstream
    req.addressed = "elsewhere"
    assert not reachable(req, alt)  # the fallback's upstream holds no key of its own
