"""Requests for the planner's unit tests, built as the request path builds them (intake's
``build_request``) from a config of one model on one upstream that is never called."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from starlette.datastructures import Headers

from proxy.config.settings import Settings, load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.formats import FORMATS
from proxy.request.conversations import PrefixTracker
from proxy.request.planning.planner import Planner
from proxy.request.recall import RecallMemory
from proxy.request.sticky_cuts import CutMemory
from proxy.summaries import Compactor
from proxy.windows.models import build_models
from proxy.wire import WireRequest

MODEL = "unit-model"
Message = dict[str, Any]


def settings_for(window: int = 4096, **policy: Any) -> Settings:
    """One model of ``window`` tokens (o200k), its default policy extended by ``policy``."""
    return load_settings(
        None,
        upstreams={"up": {"base_url": "http://127.0.0.1:9/v1"}},
        models={MODEL: {"context_window": window, "tokenizer": "o200k_base"}},
        policies={"default": {}, "unit": {"extends": "default", **policy}},
        default_policy="unit",
    )


def request(settings: Settings, messages: Sequence[Message], **payload: Any) -> WireRequest:
    """A chat completions request of ``messages`` (and ``payload``'s other fields)."""
    body = orjson.dumps({"model": MODEL, "messages": list(messages), **payload})
    team = settings.default_team
    who = Principal(team=team, config=settings.teams[team], forward_client_auth=False)
    return build_request(body, Headers(), settings, build_models(settings), who, FORMATS["chat"])


def planner_for(settings: Settings, compactor: Compactor | None = None) -> Planner:
    """A planner with memories of its own (no store)."""
    return Planner(
        settings=settings,
        compactor=compactor,
        prefixes=PrefixTracker(),
        cuts=CutMemory(),
        recalls=RecallMemory(),
    )


def words(n: int, word: str = "alpha") -> str:
    return " ".join(f"{word}{k % 50}" for k in range(n))


def chat(turns: int, size: int = 200) -> list[Message]:
    """A system prompt and ``turns`` user/assistant turns of about ``size`` tokens each, then
    the newest user message."""
    out: list[Message] = [{"role": "system", "content": "You are terse."}]
    for t in range(turns):
        out.append({"role": "user", "content": f"question {t}: {words(size // 2, f'q{t}x')}"})
        out.append({"role": "assistant", "content": f"answer {t}: {words(size // 2, f'a{t}y')}"})
    out.append({"role": "user", "content": "and now?"})
    return out
