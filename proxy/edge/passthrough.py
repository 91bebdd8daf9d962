"""Every other ``/v1/*`` path (embeddings, responses, files...) forwarded untouched."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

from proxy.config.settings import Settings
from proxy.edge.auth import SPEND_FIELDS, Principal
from proxy.edge.forwarded_fields import fields_of
from proxy.edge.ownership import answered_ids, is_reference, named_in_path
from proxy.errors import (
    BadRequest,
    Forbidden,
    Invariant,
    ProxyError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from proxy.headers import decode_headers, upstream_headers
from proxy.observe.outcome import Outcome
from proxy.paths import forwardable, query_of
from proxy.providers.registry import provider_of
from proxy.upstreams.forwarding import decoded, join_url, respond
from proxy.windows.families import is_pattern

if TYPE_CHECKING:
    from proxy.runtime import Runtime
    from proxy.windows.models import Models

NO_BODY = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
HEAD = 65536  # of a forwarded answer, read for the ids of the objects it made


async def handle_passthrough(request: Request, rt: Runtime, subpath: str) -> Response:
    """Forward a path the proxy does not fit: the body's ``model`` picks the upstream and must be
    one the team may use; with the proxy's own key (``keys`` mode, or a key in config) only
    allowlisted paths go; the answer says ``not-fitted`` and is counted by path."""
    started = time.perf_counter()
    who = rt.auth.team(request.headers, query_of(request.scope))
    label = path_label(subpath, rt.settings.forward_paths)
    model: str | None = None
    status = 0
    try:
        body, payload = None, None
        if request.method not in NO_BODY:
            content_type = request.headers.get("content-type", "")
            # The one admission (proxy/edge/admission.py): bytes, nodes, the team's slot, and
            # a large body parsed off the event loop.
            async with rt.admission.admit(request, who.team) as body:
                read = await rt.admission.elsewhere(body, acted_on, body, content_type)
                payload = _raised(read)
        model = _model_of(payload)
        if payload is not None:
            who.check_spend(payload)
        routes = Routes(settings=rt.settings, models=rt.models)
        name = _route(routes, who, model, subpath, request.headers)
        upstream = rt.settings.upstreams[name]
        key = rt.settings.api_key(name)
        if (rt.settings.holds_key(name) or not who.forward_client_auth) and label == "other":
            raise Forbidden(
                f"/v1/{subpath} is not forwarded with the gateway's key; the operator may add it "
                "to forward_paths",
                code="path_not_allowed",
            )
        keys = rt.settings.auth == "keys"
        if keys:  # stored objects a body or the path names (proxy/edge/ownership.py)
            capped = bool(who.config.max_context_tokens)
            await rt.owners.check(who.team, capped, payload or {}, named_in_path(subpath))
        headers = upstream_headers(
            decode_headers(request.headers.raw), upstream, key, who.forward_client_auth
        )
        if upstream.base_url is None:  # _route forwards only to an upstream with a base_url
            raise Invariant(f"upstream {name!r} has no base_url to forward /v1/{subpath} to")
        url = join_url(upstream.base_url, subpath, query_of(request.scope))
        reply = await rt.transport.send(upstream, request.method, url, headers, body)
        status = reply.status
        if keys and reply.status == 200 and reply.body is not None:
            made = answered_ids(decoded(reply.body, reply.headers)[:HEAD])  # a new object's id
            await rt.owners.claim(who.team, made)
        return respond(reply, [("x-contextwarden-actions", "not-fitted")])
    except ProxyError as exc:
        status = exc.status
        raise
    finally:
        outcome = Outcome(
            team=who.team,
            model=model or "-",
            status=status,
            tokens_before=None,
            tokens_after=None,
            actions=["not-fitted"],
            retries=0,
            checkpoint=None,
            overhead=time.perf_counter() - started,
            upstream=0.0,
            stream=False,
            path=label,
            format="-",
        )
        rt.metrics.record(outcome)


def path_label(subpath: str, patterns: list[str]) -> str:
    """The allowlist pattern a path matches (a bounded metrics label), else ``other``."""
    return next((p for p in patterns if forwardable(subpath, [p])), "other")


@dataclass(frozen=True, slots=True, kw_only=True)
class Routes:
    """What picks a forwarded request's upstream: the settings (the upstreams, the default)
    and the models (a model's route)."""

    settings: Settings
    models: Models


def _route(
    routes: Routes, who: Principal, model: str | None, subpath: str, headers: Headers
) -> str:
    """The upstream for this request: its model's, else the one its API addressed; the team
    must be allowed the model, and a team limited to some models must name one."""
    settings = routes.settings
    if model is None:
        if who.config.models is not None:
            raise Forbidden(
                f"team {who.team!r} may only use some models, and this /v1/{subpath} request "
                "names none in a JSON body",
                code="model_not_allowed",
            )
        name = addressed_upstream(settings, headers)
    else:
        who.check_model(model)
        name = routes.models.resolve(model).route.name
    if not provider_of(settings.upstreams[name]).forwards:
        raise BadRequest(f"/v1/{subpath} is only forwarded to an upstream with a base_url")
    return name


def addressed_upstream(settings: Settings, headers: Headers) -> str:
    """The upstream a request that names no model addressed: the default, unless the request
    speaks Anthropic's API (``anthropic-version``: its SDKs and Claude Code always send it) and
    the default serves no Messages; then the upstream that does (an Anthropic one first). So
    an Anthropic client's ``GET /v1/models`` gets Anthropic's list, and its key never goes to
    another provider."""
    default = settings.default_upstream
    if "anthropic-version" not in headers or "messages" in settings.upstreams[default].served_apis:
        return default
    serving = [
        name
        for name, u in settings.upstreams.items()
        if "messages" in u.served_apis and u.base_url is not None
    ]
    serving.sort(key=lambda name: not provider_of(settings.upstreams[name]).native_messages)
    return serving[0] if serving else default


# What the proxy acts on in a forwarded body: the model, what it may spend, the stored objects
# it names (proxy/edge/auth.py, proxy/edge/ownership.py). The rest goes upstream unread.
ACTED_ON = ("model", *SPEND_FIELDS, "previous_response_id", "conversation")
Read = tuple[str | None, str | None, dict[str, Any] | None]  # (error, its param, payload)


def acted_on(body: bytes, content_type: str) -> Read:
    """The forwarded body's fields the proxy acts on, read as strictly as a fitted body (a
    large body's in the worker process: a 32 MiB parse never holds this process's
    interpreter, and only these fields come back)."""
    try:
        payload = fields_of(body, content_type, ACTED_ON)
    except BadRequest as exc:
        return exc.message, exc.param, None
    if payload is None:
        return None, None, None
    kept = {k: payload[k] for k in ACTED_ON if k in payload}
    items = payload.get("input")
    if isinstance(items, list):
        kept["input"] = [i for i in items if is_reference(i)]
    return None, None, kept


def _raised(read: Read) -> dict[str, Any] | None:
    error, param, payload = read
    if error is not None:
        raise BadRequest(error, param=param)
    return payload


def _model_of(payload: dict[str, Any] | None) -> str | None:
    """The ``model`` a JSON body names (None for no body, another type, or no model)."""
    model = payload.get("model") if payload is not None else None
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string", param="model")
    return model


async def handle_models(request: Request, rt: Runtime) -> Response:
    """The default upstream's model list when it answers, with the configured models added; an
    Anthropic client's (``addressed_upstream``) is its Anthropic upstream's, as it answers."""

    who = rt.auth.team(request.headers, query_of(request.scope))
    listed: list[dict[str, object]] = []
    name = addressed_upstream(rt.settings, request.headers)
    upstream = rt.settings.upstreams[name]
    listing = provider_of(upstream).model_list
    if upstream.base_url is not None and listing == "relayed":
        key = rt.settings.api_key(name)
        headers = upstream_headers(
            decode_headers(request.headers.raw), upstream, key, who.forward_client_auth
        )
        url = join_url(upstream.base_url, "models", query_of(request.scope))
        reply = await rt.transport.send(upstream, "GET", url, headers, None)
        if reply.status != 200:
            return respond(reply, [])
        raw = reply.body if reply.stream is None else b"".join([c async for c in reply.stream])
        try:
            data = orjson.loads(raw or b"{}")
            models = data["data"]
            if not isinstance(models, list):
                raise TypeError("not a list of models")
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return respond(replace(reply, body=raw, stream=None), [])  # relayed as it came
        if who.config.models is not None:  # a team sees the models it may use
            models = [m for m in models if isinstance(m, dict) and who.allows(str(m.get("id")))]
        data["data"] = [
            with_window(m, rt.models, who) if isinstance(m, dict) else m for m in models
        ]
        return respond(replace(reply, body=orjson.dumps(data), stream=None), [])
    if upstream.base_url is not None and listing == "merged":
        key = rt.settings.api_key(name)
        headers = upstream_headers(
            decode_headers(request.headers.raw), upstream, key, who.forward_client_auth
        )
        url = join_url(upstream.base_url, "models")
        configured = [m for m in rt.settings.models if not is_pattern(m)]
        try:
            reply = await rt.transport.send(upstream, "GET", url, headers, None)
        except (UpstreamUnavailable, UpstreamTimeout):
            # Unreachable: the configured models are still the proxy's to list (it serves
            # them); with none, the 502 or 504 stands (an empty list would say there are none).
            if not configured:
                raise
            unreachable = True
        else:
            unreachable = False
            if reply.status != 200:
                return respond(reply, [])
        if not unreachable:
            raw = reply.body if reply.stream is None else b"".join([c async for c in reply.stream])
            try:
                data = orjson.loads(raw or b"{}")
                listed = [m for m in data.get("data", []) if isinstance(m, dict)]
            except (orjson.JSONDecodeError, AttributeError):
                listed = []  # not a list we can read: the configured models still are
    if who.config.models is not None:
        listed = [m for m in listed if who.allows(str(m.get("id")))]
    known = {m.get("id") for m in listed}
    now = int(time.time())
    for model in rt.settings.models:
        if is_pattern(model):
            continue  # a family is not a model a client can ask for by that name
        if model not in known and who.allows(model):
            listed.append(
                {"id": model, "object": "model", "created": now, "owned_by": "contextwarden"}
            )
    listed = [with_window(m, rt.models, who) for m in listed]
    if "anthropic-version" in request.headers:  # an Anthropic client of a server that is not
        return Response(orjson.dumps(anthropic_list(listed)), media_type="application/json")
    return Response(orjson.dumps({"object": "list", "data": listed}), media_type="application/json")


def anthropic_list(listed: list[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI-shaped model list in Anthropic's shape (an Anthropic client, Claude Code, of an
    OpenAI-compatible server that also serves Messages): its SDK reads ``type``, ``id``,
    ``display_name``, ``created_at`` and the page's ``has_more``, ``first_id``, ``last_id``."""
    models = []
    for m in listed:
        created = m.get("created")
        stamp = created if isinstance(created, int) and not isinstance(created, bool) else 0
        model = {
            "type": "model",
            "id": m.get("id"),
            "display_name": m.get("display_name") or m.get("id"),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp)),
        }
        models.append(model | {k: m[k] for k in WINDOW_FIELDS if k in m})
    first, last = (models[0]["id"], models[-1]["id"]) if models else (None, None)
    return {"data": models, "has_more": False, "first_id": first, "last_id": last}


WINDOW_FIELDS = ("context_window", "max_input_tokens", "max_tokens")


def with_window(model: dict[str, Any], models: Models, who: Principal) -> dict[str, Any]:
    """A listed model with the window the proxy fits its requests to (and the reply limit it
    knows), in the fields clients and gateways read: ``context_window`` (Codex's model info,
    OpenAI-style gateways), ``max_input_tokens`` and ``max_tokens`` (Anthropic's model
    capabilities, LiteLLM). The upstream's own figure is replaced when the proxy's is lower
    (the team's cap, what overflows taught): a client that plans by it never asks for more than
    the proxy forwards. A model the proxy knows no window for is listed as it came."""
    name = model.get("id")
    if not isinstance(name, str) or not name:
        return model
    try:
        spec = models.resolve(name)
    except ProxyError:
        return model
    window = models.told_window(spec, who.learns_as, who.config.max_context_tokens)
    if window is None:
        return model
    told = dict(model)
    for field in ("context_window", "max_input_tokens"):
        stated = told.get(field)
        if not isinstance(stated, int) or isinstance(stated, bool) or stated > window:
            told[field] = window
    limit = told.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool):
        limit = spec.max_output
    if limit:
        told["max_tokens"] = min(limit, window)  # no reply is longer than the window
    return told
