"""The ASGI application: routes, lifespan, and the one place errors become responses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from proxy.config.environment import prepare_environment
from proxy.config.settings import Settings
from proxy.edge.auth import Principal
from proxy.edge.origins import TrustedCallers
from proxy.edge.passthrough import handle_models, handle_passthrough
from proxy.edge.preview import handle_preview
from proxy.edge.readiness import Readiness
from proxy.edge.sharing import Sharing, learned_windows, scope_key
from proxy.edge.traced import fitted
from proxy.edge.websockets import elsewhere, quiet_denials, serve
from proxy.errors import (
    BadRequest,
    Invariant,
    NoRoute,
    NotFound,
    ProxyError,
    anthropic_error,
    error_body,
    error_response,
)
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.chat import CHAT
from proxy.formats.completions import COMPLETIONS
from proxy.formats.responses import RESPONSES
from proxy.headers import TEAM as TEAM_HEADER
from proxy.paths import SafePaths, is_messages_path, query_of
from proxy.request.planning.off_loop import interpreter_shared
from proxy.runtime import Runtime, new_transport, run_each
from proxy.upstreams.forwarding import Transport

if TYPE_CHECKING:
    from proxy.observe.tracing import Telemetry

log = logging.getLogger("contextwarden")
MAX_CONNECTIONS = 1024


def create_app(
    settings: Settings, transport: Transport | None = None, telemetry: Telemetry | None = None
) -> Starlette:
    """Build the proxy. ``transport`` lets tests inject one (tests/respx_transport.py); by
    default the upstream transport is pooled for the app's life. ``telemetry`` too
    (OpenTelemetry's, proxy/observe/tracing.py); by default the OTEL_* variables say."""
    prepare_environment()
    quiet_denials()

    readiness = Readiness()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        upstream = transport or new_transport(MAX_CONNECTIONS)
        runtime = await Runtime.start(settings, upstream, telemetry)
        app.state.runtime = runtime
        if runtime.store.disabled:
            readiness.note = f"checkpoints disabled: {runtime.store.disabled}"
        readiness.also("the summarizer's library (litellm) to load", runtime.compactor.llm.loaded)
        await readiness.start(runtime.connect)
        readiness.on_shutdown_signal()
        steps = (
            [
                scope_key(runtime.store, runtime.auth),
                learned_windows(runtime.store, runtime.windows),
            ]
            if settings.shared_store
            else []
        )
        sharing = Sharing(steps, readiness)
        sharing.start()
        try:
            with interpreter_shared():
                yield
        finally:
            await run_each([readiness.stop, sharing.stop, runtime.stop])

    routes = [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/responses", responses, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/messages", messages, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/v1/contextwarden/preview", preview, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/admin/stats", admin_stats, methods=["GET"]),
        Route("/admin/learned-windows", admin_windows, methods=["GET"]),
        Route("/admin/windows/{team}/{model:path}", admin_window, methods=["GET"]),
        Route(
            "/admin/learned-windows/{team}/{model:path}", admin_forget_window, methods=["DELETE"]
        ),
        Route("/admin/learned-capabilities", admin_capabilities, methods=["GET"]),
        Route(
            "/admin/learned-capabilities/{scope}/{upstream}",
            admin_forget_capability,
            methods=["DELETE"],
        ),
        Route("/admin/preview", admin_preview, methods=["POST"]),
        Route("/v1/{subpath:path}", passthrough, methods=_ALL_METHODS),
        WebSocketRoute("/v1/responses", serve),
        WebSocketRoute("/responses", serve),
        WebSocketRoute("/{path:path}", elsewhere),
    ]
    handlers = {ProxyError: _proxy_error, HTTPException: _no_route, Exception: _unexpected}
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers=handlers,
        middleware=[Middleware(TrustedCallers, settings=settings), Middleware(SafePaths)],
    )
    app.state.readiness = readiness
    return app


_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def chat(request: Request) -> Response:
    return await fitted(request, _runtime(request), CHAT)


async def responses(request: Request) -> Response:
    return await fitted(request, _runtime(request), RESPONSES)


async def messages(request: Request) -> Response:
    return await fitted(request, _runtime(request), ANTHROPIC)


async def completions(request: Request) -> Response:
    return await fitted(request, _runtime(request), COMPLETIONS)


async def models(request: Request) -> Response:
    return await handle_models(request, _runtime(request))


async def passthrough(request: Request) -> Response:
    return await handle_passthrough(request, _runtime(request), request.path_params["subpath"])


async def preview(request: Request) -> Response:
    rt = _runtime(request)
    who = rt.auth.team(request.headers, query_of(request.scope))
    return await handle_preview(request, rt.models, rt.planner, who, rt.admission)


async def metrics(request: Request) -> Response:
    rt = _runtime(request)
    rt.auth.metrics(request.headers)
    # Rendering is CPU work proportional to the series; the event loop keeps serving meanwhile.
    body = await asyncio.to_thread(rt.metrics.render)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def admin_stats(request: Request) -> Response:
    rt = _runtime(request)
    rt.auth.admin(request.headers)
    stats = {
        "teams": rt.metrics.team_stats(),
        "summarizer": rt.compactor.figures(),
        "summarizer_by_team": await rt.compactor.team_figures(),
        "memory": rt.memory.figures() if rt.memory is not None else {},
    }
    return JSONResponse(stats)


async def admin_windows(request: Request) -> Response:
    rt = _runtime(request)
    rt.auth.admin(request.headers)
    learned = rt.models.learned
    return JSONResponse(
        {
            "learned_windows": learned.items(),
            "evidence": learned.evidence(),
            "calibration": rt.models.calibration.items(),
            "without_figures": learned.without_figures(),
            "discovered": rt.models.discovered.items(),
        }
    )


async def admin_window(request: Request) -> Response:
    """A model's window for a team: in the proxy's count, in the upstream's units, and why."""
    rt = _runtime(request)
    rt.auth.admin(request.headers)
    team, model = request.path_params["team"], request.path_params["model"]
    # In passthrough windows are learned per caller: ``team~caller``, as the listing names it.
    name = team.partition("~")[0]
    if name not in rt.settings.teams:
        raise NotFound(f"unknown team {name!r}")
    spec = rt.models.resolve(model)
    window = rt.models.window_for(spec, team, rt.settings.teams[name].max_context_tokens)
    return JSONResponse({"team": team, "model": spec.name, **window.report()})


async def admin_forget_window(request: Request) -> Response:
    """Forget what overflows and usage taught about a model for a team (its learned window,
    its bounds and its calibration): the configured window is in force again."""
    rt = _runtime(request)
    rt.auth.admin(request.headers)
    team, model = request.path_params["team"], request.path_params["model"]
    if not await rt.windows.forget(team, model):
        raise NotFound(f"nothing was learned about model {model!r} for team {team!r}")
    return JSONResponse({"team": team, "model": model, "forgotten": True})


async def admin_capabilities(request: Request) -> Response:
    """What upstreams were learned not to serve, per caller scope (a team in keys mode,
    ``team~caller`` in passthrough): the upstreams whose Responses compactions the proxy
    answers itself."""
    rt = _runtime(request)
    rt.auth.admin(request.headers)
    return JSONResponse({"compaction_served": await rt.compactions.items(rt.store)})


async def admin_forget_capability(request: Request) -> Response:
    """Forget that ``upstream`` does not compact for ``scope``: its next compaction is
    forwarded again."""
    rt = _runtime(request)
    rt.auth.admin(request.headers)
    scope, upstream = request.path_params["scope"], request.path_params["upstream"]
    if not await rt.compactions.forget(scope, upstream, rt.store):
        raise NotFound(f"nothing was learned about upstream {upstream!r} for {scope!r}")
    return JSONResponse({"scope": scope, "upstream": upstream, "forgotten": True})


async def admin_preview(request: Request) -> Response:
    """A preview as any team (``x-contextwarden-team``, default the default team)."""
    rt = _runtime(request)
    rt.auth.admin(request.headers)
    name = request.headers.get(TEAM_HEADER) or rt.settings.default_team
    if name not in rt.settings.teams:
        raise BadRequest(f"unknown team {name!r}", param=TEAM_HEADER)
    who = Principal(team=name, config=rt.settings.teams[name], forward_client_auth=False)
    return await handle_preview(request, rt.models, rt.planner, who, rt.admission, True)


async def health(request: Request) -> Response:
    """Liveness: the process answers (whether to send it requests is ``/ready``'s)."""
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> Response:
    """Readiness (proxy/edge/readiness.py): 503 until the store has answered once, and from
    the moment a shutdown begins."""
    readiness: Readiness = request.app.state.readiness
    status, body = readiness.report()
    return JSONResponse(body, status)


def _shape(request: Request) -> str:
    """Whose error shape the client reads: Anthropic's on the Messages paths."""
    return "anthropic" if is_messages_path(request.url.path) else "openai"


async def _proxy_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, ProxyError):
        raise Invariant("the ProxyError handler given another error") from exc
    return error_response(exc, shape=_shape(request))


async def _no_route(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 (plain text) in the client's own error shape."""
    if not isinstance(exc, HTTPException):
        raise Invariant("the HTTPException handler given another error") from exc
    if exc.status_code not in (404, 405):
        return Response(exc.detail, exc.status_code, headers=exc.headers)
    refused = NoRoute(exc.status_code, request.method, request.url.path)
    # On no route, an Anthropic client is known by the version header its SDK always sends.
    shape = "anthropic" if "anthropic-version" in request.headers else _shape(request)
    return error_response(refused, headers=dict(exc.headers or {}), shape=shape)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    message = "internal proxy error; see the proxy's log"
    if _shape(request) == "anthropic":
        body = anthropic_error("api_error", message)
    else:
        body = error_body(message, "server_error", "internal_error")
    return Response(body, 500, media_type="application/json")
