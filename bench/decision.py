"""Decision time (count + trim) in process, cold and warm, against a naive full recount."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import orjson
from starlette.datastructures import Headers

from bench.conversations import agent_conversation
from proxy.config.settings import load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.formats.chat import CHAT
from proxy.formats.reused_items import RecentItems
from proxy.request.conversations import PrefixTracker
from proxy.request.kept_prefix import see_prefix
from proxy.request.planning.planner import Planner, broken
from proxy.request.sticky_cuts import CutMemory
from proxy.windows.models import build_models
from proxy.windows.tokenizers import text_tokens
from strategies.tokens import ChatCounter, count_prompt


def _settings(tokens: int) -> Any:
    return load_settings(
        None,
        upstreams={"mock": {"base_url": "http://127.0.0.1:9/v1"}},
        default_upstream="mock",
        models={
            "fits": {"context_window": tokens * 2 + 8192, "tokenizer": "o200k_base"},
            "over": {"context_window": tokens // 2 + 4096, "tokenizer": "o200k_base"},
        },
        policies={"default": {"summarize": False}},
    )


def _time(fn: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def decision_rows(sizes: tuple[int, ...]) -> tuple[list[str], list[list[str]]]:
    loop = asyncio.new_event_loop()
    try:
        return _rows(sizes, loop)
    finally:
        loop.close()


def _rows(
    sizes: tuple[int, ...], loop: asyncio.AbstractEventLoop
) -> tuple[list[str], list[list[str]]]:
    header = [
        "conversation",
        "naive recount",
        "ours cold",
        "ours warm (+1 message)",
        "warm vs naive",
        "warm, fits (no trim)",
        "warm, sticky replay",
        "its post-condition check",
    ]
    rows = []
    last_actions: list[str] = []  # the last plan's
    last_plan: list[Any] = []  # and the request it was made for, with the plan
    for tokens in sizes:
        settings = _settings(tokens)
        who = Principal(team="default", config=settings.teams["default"], forward_client_auth=False)
        probe = ChatCounter(text_tokens("o200k_base"))
        convo = agent_conversation(tokens, probe)
        grown = [
            *convo,
            {"role": "assistant", "content": "Done with that step."},
            {"role": "user", "content": "Next step please."},
        ]
        repeat = 3 if tokens >= 128000 else 7

        def naive(messages: list[Any] = grown) -> None:
            count_prompt(ChatCounter(text_tokens("o200k_base")), messages)  # no cache: every token

        def plan(
            models: Any,
            planner: Planner,
            recent: RecentItems,
            model: str,
            messages: list[Any],
            settings: Any = settings,
            who: Any = who,
        ) -> float:
            body = orjson.dumps({"model": model, "messages": messages, "max_tokens": 1024})
            t = time.perf_counter()
            req = build_request(body, Headers(), settings, models, who, CHAT, None, recent)
            made = loop.run_until_complete(planner.plan_first(req))
            elapsed = time.perf_counter() - t
            last_actions[:] = made.actions
            last_plan[:] = [req, made]
            if planner.prefixes is not None:  # what the proxy notes once the answer is in
                loop.run_until_complete(see_prefix(planner.prefixes, req, made))
            return elapsed

        colds, warms, fits, replays, checks = [], [], [], [], []
        for _ in range(repeat):
            # A new proxy for the cold count; the warm one has seen the conversation's last
            # request (one planner serves every request, as in the proxy). Without the
            # conversation's last cut, the warm trimmed request is cut afresh; with it (the
            # proxy's own planner, sticky cuts), the cut is replayed. Each proxy remembers its
            # conversations' last items (proxy/formats/reused_items.py).
            models, planner, recent = (
                build_models(settings),
                Planner(settings=settings, compactor=None),
                RecentItems(),
            )
            colds.append(plan(models, planner, recent, "over", convo))
            warms.append(plan(models, planner, recent, "over", grown))
            # The post-condition, on the warm trimmed plan it was just made part of.
            checks.append(_time(lambda p=list(last_plan): broken(*p), 21))
            plan(models, planner, recent, "fits", convo)
            fits.append(plan(models, planner, recent, "fits", grown))
            sticky, recent = (
                Planner(
                    settings=settings, compactor=None, prefixes=PrefixTracker(), cuts=CutMemory()
                ),
                RecentItems(),
            )
            plan(models, sticky, recent, "over", convo)
            cut = bool(last_actions)  # not in --quick's sizes, whose conversations fit
            replays.append(plan(models, sticky, recent, "over", grown))
            if cut and "sticky" not in last_actions:
                raise RuntimeError(f"the warm request was not replayed: {last_actions}")
        t_naive = _time(naive, repeat)
        cold, warm, fit, replayed = (statistics.median(x) for x in (colds, warms, fits, replays))
        rows.append(
            [
                f"{count_prompt(probe, convo) // 1000}k tokens, {len(convo)} messages",
                f"{t_naive * 1000:.1f} ms",
                f"{cold * 1000:.1f} ms",
                f"{warm * 1000:.2f} ms",
                f"{t_naive / warm:.0f}x faster",
                f"{fit * 1000:.2f} ms",
                f"{replayed * 1000:.2f} ms",
                f"{statistics.median(checks) * 1e6:.0f} us",
            ]
        )
    return header, rows
