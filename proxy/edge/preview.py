"""What the proxy would forward, without forwarding: ``POST /v1/contextwarden/preview`` and
``contextwarden preview``. Both produce the same report object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from starlette.datastructures import Headers
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response

from proxy.config.settings import Settings
from proxy.edge.admission import Admission
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.errors import BadRequest, Forbidden, ProxyError
from proxy.formats import FORMATS, format_of
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.base import WireFormat
from proxy.formats.chat import CHAT
from proxy.request.planning.plan import Plan
from proxy.request.planning.planner import Planner
from proxy.stores import open_store
from proxy.summaries import Compactor
from proxy.summaries.llm import LLMSummarizer
from proxy.windows.models import Models, build_models
from proxy.wire import WireRequest
from strategies.rules import breakdown

T = TypeVar("T")


async def preview(
    body: bytes,
    headers: Headers,
    models: Models,
    planner: Planner,
    who: Principal,
    dry_run: bool = True,
    fmt: WireFormat = CHAT,
    admission: Admission | None = None,
) -> dict[str, Any]:
    """What the proxy would forward. A dry run by default: no summarizer call, no checkpoint
    or learned window written; a summary it would make is reported as ``would-summarize``.
    The conversation comes back in the request's own format, under its own field.

    ``admission`` (the HTTP route's): a large body's parse, view and report run off the event
    loop, as on the request path."""
    run = admission.run if admission is not None else _inline
    req = await run(body, build_request, body, headers, planner.settings, models, who, fmt)
    plan = await planner.plan_first(req, exact=True, dry_run=dry_run)
    return await run(body, _result, plan, req)


async def _inline(body: bytes, work: Callable[..., T], *args: Any) -> T:
    return work(*args)


def _result(plan: Plan, req: WireRequest) -> dict[str, Any]:
    key = req.fmt.messages_param
    forwarded = orjson.loads(plan.body) if plan.actions else req.payload
    return {key: forwarded.get(key), "report": report(plan, req, req.window, req.view.messages)}


def report(plan: Plan, req: WireRequest, window: int | None, original: list[Any]) -> dict[str, Any]:
    spec, policy = req.spec, req.policy
    fit = plan.fit
    budget = plan.budget
    if fit is not None and fit.report is not None:
        blocks = fit.report.blocks
    elif budget is not None:
        counter = req.counter()
        blocks = breakdown(original, counter, policy.engine.rules, policy.engine.history)
    else:
        blocks = []
    return {
        "model": spec.name,
        "format": req.fmt.name,
        "team": req.team,
        "policy": policy.name,
        "upstream": spec.route.name,
        "window": window,
        "budget": budget.messages if budget else None,
        "reserve": budget.reserve if budget else None,
        "tools_tokens": budget.tools if budget else None,
        "tokens_before": plan.tokens_before,
        "tokens_after": plan.tokens_after,
        "count": plan.counted,
        "actions": plan.actions or ["none"],
        "cache_stable": fit.cache_stable if fit else True,
        "checkpoint": plan.checkpoint,
        "steps": [
            {"name": s.name, "applied": s.applied, "tokens_saved": s.tokens_saved}
            for s in (fit.steps if fit else [])
        ],
        "blocks": [
            {
                "id": b.id,
                "tier": int(b.tier),
                "strategy": b.strategy,
                "tokens_before": b.tokens_before,
                "tokens_after": b.tokens_after,
                "label": b.label,
            }
            for b in blocks
        ],
    }


def shaped(body: bytes, models: Models | None = None) -> WireFormat:
    """The body's format from its shape (``?format=`` or ``--format`` says it outright). A
    body that reads as chat and as Messages alike (user turns of plain text and
    ``max_tokens``) is taken as Messages when its model's upstream serves Messages and not
    chat: a ``claude-*`` body of the quick start's, previewed as its client sends it."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return CHAT  # its parse says what is wrong, in chat's words
    fmt = format_of(payload)
    model = payload.get("model") if isinstance(payload, dict) else None
    if fmt is not CHAT or models is None or not isinstance(model, str):
        return fmt
    apis = models.resolve(model).route.apis
    if CHAT.api in apis or ANTHROPIC.api not in apis:
        return CHAT
    try:
        ANTHROPIC.parse(body)
    except ProxyError:
        return CHAT  # chat indeed (a system message, tool calls): its upstream refuses it
    return ANTHROPIC


async def offline_preview(
    body: bytes, headers: Headers, settings: Settings, who: Principal, fmt: WireFormat | None = None
) -> dict[str, Any]:
    """The CLI's preview: the same planner and compactor as the proxy's (reading the same
    checkpoint store), so the CLI and ``POST /v1/contextwarden/preview`` agree on a body."""
    store = open_store(settings)
    try:
        planner = Planner(settings=settings, compactor=Compactor(store, LLMSummarizer()))
        models = build_models(settings)
        fmt = fmt or shaped(body, models)
        return await preview(body, headers, models, planner, who, fmt=fmt)
    finally:
        await store.close()


async def handle_preview(
    request: StarletteRequest,
    models: Models,
    planner: Planner,
    who: Principal,
    admission: Admission,
    may_summarize: bool = False,
) -> Response:
    """``?summarize=true`` makes the real summary (a billed call, a stored checkpoint): only
    where ``may_summarize`` (the admin API). The body goes through the one admission (its
    team's slot, the node cap, the work off the event loop), as on the request path."""
    summarize = request.query_params.get("summarize", "false").lower() == "true"
    if summarize and not may_summarize:
        raise Forbidden(
            "?summarize=true (a real, billed summary) is for the admin API's /admin/preview",
            code="summarize_not_allowed",
        )
    name = request.query_params.get("format")
    if name is not None and name not in FORMATS:
        raise BadRequest(f"unknown format {name!r}: one of {', '.join(FORMATS)}", param="format")
    async with admission.admit(request, who.team) as body:
        fmt = FORMATS[name] if name is not None else await admission.run(body, shaped, body, models)
        result = await preview(
            body, request.headers, models, planner, who, not summarize, fmt, admission
        )
        answer = await admission.run(body, orjson.dumps, result)
    return Response(answer, media_type="application/json")


def render_table(result: dict[str, Any]) -> str:
    """The report as a table for people tuning a policy."""
    r = result["report"]
    lines = [
        f"model {r['model']} -> upstream {r['upstream']}: window {r['window']}, budget for "
        f"messages {r['budget']} (reply reserve {r['reserve']}, tools {r['tools_tokens']})",
        f"tokens {r['tokens_before']} -> {r['tokens_after']} ({r['count']}); "
        f"actions: {', '.join(r['actions'])}; prompt prefix cache-stable: {r['cache_stable']}"
        + (f"; checkpoint: {r['checkpoint']}" if r["checkpoint"] else ""),
        "",
        f"{'block':<16} {'tier':>4}  {'strategy':<18} {'tokens':>15}  label",
    ]
    for b in r["blocks"]:
        tokens = f"{b['tokens_before']} -> {b['tokens_after']}"
        lines.append(
            f"{b['id']:<16} {b['tier']:>4}  {b['strategy']:<18} {tokens:>15}  {b['label'] or '-'}"
        )
    if r["steps"]:
        lines += ["", "passes:"]
        lines += [
            f"  {s['name']:<26} {'applied' if s['applied'] else 'no change':<9} "
            f"saved {s['tokens_saved']}"
            for s in r["steps"]
        ]
    conversation = result.get("input", result.get("messages"))
    count = len(conversation) if isinstance(conversation, list) else 1
    noun = "items" if "input" in result else "messages"
    lines += ["", f"{count} {noun} would be forwarded"]
    return "\n".join(lines)
