"""Each session's requests, in order, through the proxy's own planner: the same intake
(``build_request``), plan (``Planner.plan_first``), prefix tracking and prompt prices as the
request path (proxy/edge/exchange.py), in process. Nothing is sent anywhere: no upstream, no
summarizer. Where the proxy would ask its summarizer for a summary, the ask is counted and
declined, and the request takes the path the proxy takes when its summarizer fails (the cut).

Every prompt is counted, as the preview counts it (``exact``): where the request path sends a
body on its byte bound alone, uncounted (the same bytes either way), a replay counts it, so
that its figures are tokens, not that bound.

Each session starts from nothing, as the proxy does for a conversation it has not seen: a
store of its own in a temporary directory, no learned windows, no calibration.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.datastructures import Headers

from proxy.config.settings import ConfigError, Settings, load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.errors import ProxyError
from proxy.estimate.prelude import Prelude
from proxy.estimate.report import Figures
from proxy.estimate.session import Session
from proxy.formats import FORMATS
from proxy.request.conversations import PinMemory, PrefixTracker
from proxy.request.kept_prefix import costs_of, see_prefix
from proxy.request.planning.planner import Planner
from proxy.request.recall import RecallMemory
from proxy.request.sticky_cuts import CutMemory
from proxy.stores import open_store
from proxy.summaries import Compactor
from proxy.summaries.llm import LLMSummarizer, SummarizerFailed, Target
from proxy.windows.models import build_models
from strategies.messages import Message
from strategies.tokens import count_prompt


class Declining(LLMSummarizer):
    """The summarizer of a replay: each ask counted (a summary the proxy would have made),
    none made; the request then takes the proxy's own path for a failed summary."""

    async def complete(
        self, messages: list[Message], target: Target, max_tokens: int, timeout: float
    ) -> str:
        self.calls += 1
        raise SummarizerFailed("an estimate makes no summary")


@dataclass(kw_only=True)
class Options:
    """What the sessions are replayed at."""

    config: str | None = None  # the proxy's config (default: the embedded one)
    window: int | None = None  # the window, in tokens (default: the model's known one)
    # Prices per model, in litellm's names (input_cost_per_token, cache_read_input_token_cost,
    # cache_creation_input_token_cost); "*" for every model (default: litellm's table).
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    model: str | None = None  # plan every session for this model (default: its own)
    team: str | None = None  # plan as this team (default: the config's default team)
    prelude: Prelude = field(default_factory=Prelude)


async def replay(session: Session, options: Options) -> Figures:
    """``session`` planned request by request; its figures."""
    model = options.model or session.model
    if model is None:
        raise ConfigError(f"{session.name}: the transcript names no model: give --model")
    with _quiet(), tempfile.TemporaryDirectory(prefix="cw-estimate-") as data:
        settings = settings_for(options, model, data)
        return await _planned(session, settings, model, options)


async def _planned(session: Session, settings: Settings, model: str, options: Options) -> Figures:
    team = options.team or settings.default_team
    if team not in settings.teams:
        raise ConfigError(f"--team {team!r}: no such team (its teams: {', '.join(settings.teams)})")
    models = build_models(settings)
    spec = models.resolve(model)
    store = open_store(settings)
    summarizer = Declining()
    prefixes = PrefixTracker()
    compactor = Compactor(store, summarizer)
    planner = Planner(
        settings=settings,
        compactor=compactor,
        prefixes=prefixes,
        cuts=CutMemory(),
        recalls=RecallMemory(),
    )
    who = Principal(team=team, config=settings.teams[team], forward_client_auth=False)
    fmt, pins = FORMATS[session.fmt], PinMemory()
    figures = Figures(session=session, model=model, window=spec.window)
    try:

        def measure(body: dict[str, Any]) -> int:
            req = build_request(orjson.dumps(body), Headers(), settings, models, who, fmt)
            return planner.budget(req, 10**9).tools + count_prompt(req.counter(), req.view.messages)

        for body in options.prelude.complete(session, model, measure):
            raw = orjson.dumps(body)
            try:
                req = build_request(raw, Headers(), settings, models, who, fmt, pins)
                # Counted, never the byte-bound fast path's upper bound: the figures are
                # tokens, whatever the window (the fast path forwards the same bytes).
                plan = await planner.plan_first(req, exact=True)
            except ProxyError as exc:
                figures.refuse(exc.message)
                continue
            seen = await see_prefix(prefixes, req, plan)
            figures.add(plan, seen, costs_of(req, plan, seen))
    finally:
        await compactor.drain()  # the summaries prepared in the background, asked for too
        await prefixes.drain()
        await store.close()
    figures.summaries = summarizer.calls
    return figures


def settings_for(options: Options, model: str, data_dir: str) -> Settings:
    """The config's settings with ``model``'s window and prices as the options say, its store
    in ``data_dir``."""
    base = load_settings(options.config)
    models: dict[str, Any] = {
        name: entry.model_dump(exclude_none=True) for name, entry in base.models.items()
    }
    entry = dict(models.get(model, {}))
    # Named on its own, the model keeps the upstream its family's entry routes it to.
    entry.setdefault("upstream", build_models(base).resolve(model).route.name)
    if options.window:
        entry["context_window"] = options.window
    prices = options.prices.get(model, options.prices.get("*"))
    if prices:
        entry["prices"] = prices
    models[model] = entry
    # The upstreams are the config's: their names route the models, and none is called.
    return load_settings(options.config, models=models, data_dir=data_dir)


@contextmanager
def _quiet() -> Iterator[None]:
    """The declined summaries' warnings are the estimate's own doing: not for its output."""
    log = logging.getLogger("contextwarden")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
