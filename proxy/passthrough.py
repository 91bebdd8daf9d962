"""Every other ``/v1/*`` path (embeddings, responses, files...) forwarded untouched."""

from __future__ import annotations

import time

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.errors import BadRequest, ProxyError
from proxy.runtime import Runtime
from proxy.upstream import decode_headers, join_url, upstream_headers

NO_BODY = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


async def handle_passthrough(request: Request, rt: Runtime, subpath: str) -> Response:
    from proxy.chat import respond  # one response builder for every relayed answer

    who = rt.auth.team(request.headers)
    name = rt.settings.default_upstream
    upstream = rt.settings.upstreams[name]
    if upstream.base_url is None or upstream.provider != "openai":
        raise BadRequest(f"/v1/{subpath} is only forwarded to an OpenAI-compatible upstream")
    key = rt.api_key(name)
    headers = upstream_headers(
        decode_headers(request.headers.raw), upstream, key, who.forward_client_auth
    )
    url = join_url(upstream.base_url, subpath, request.url.query)
    content = None if request.method in NO_BODY else request.stream()
    reply = await rt.transport.send(upstream, request.method, url, headers, content)
    return respond(reply, [])


async def handle_models(request: Request, rt: Runtime) -> Response:
    """The default upstream's model list when it answers, with the configured models added."""
    who = rt.auth.team(request.headers)
    listed: list[dict[str, object]] = []
    name = rt.settings.default_upstream
    upstream = rt.settings.upstreams[name]
    if upstream.base_url is not None and upstream.provider == "openai":
        key = rt.api_key(name)
        headers = upstream_headers(
            decode_headers(request.headers.raw), upstream, key, who.forward_client_auth
        )
        url = join_url(upstream.base_url, "models")
        try:
            reply = await rt.transport.send(upstream, "GET", url, headers, None)
            raw = reply.body if reply.stream is None else b"".join([c async for c in reply.stream])
            data = orjson.loads(raw or b"{}") if reply.status == 200 else {}
            listed = [m for m in data.get("data", []) if isinstance(m, dict)]
        except (ProxyError, orjson.JSONDecodeError, AttributeError):
            listed = []
    if who.config.models is not None:
        listed = [m for m in listed if m.get("id") in who.config.models]
    known = {m.get("id") for m in listed}
    now = int(time.time())
    for model in rt.settings.models:
        if model not in known and (who.config.models is None or model in who.config.models):
            listed.append(
                {"id": model, "object": "model", "created": now, "owned_by": "contextwarden"}
            )
    return Response(orjson.dumps({"object": "list", "data": listed}), media_type="application/json")
