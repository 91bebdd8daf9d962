"""A Responses compaction request (Codex's "remote compaction v2": an input that ends with a
``compaction_trigger`` item, answered with exactly one ``compaction`` item; the wire side is
proxy/formats/compaction.py), for an upstream that does not implement it.

Per upstream (``responses_compaction``): ``upstream`` forwards it as any request; ``proxy``
answers it; ``auto`` (the default) forwards it and reads the whole answer: one that is a
compaction is relayed as it came; a refused key, a rate limit, a server busy or down
(``PASSING``) is relayed too and teaches nothing. Any other answer is answered by the proxy
itself; only the upstream's explicit "not supported" (proxy/upstreams/capabilities.py) teaches
that it does not compact, for the caller's scope alone (``learns_as``), kept in the store: that
scope's later compactions are answered without asking. Anything else (an unknown field, a bad
value, an ordinary turn, a 500) may be the caller's own doing, and teaches nothing.

The proxy's answer is its own summary checkpoint of the conversation, made by the summarizer as
the other checkpoints are (proxy/summaries/handoff.py), carried in the compaction item; when the
client sends the item back, it is expanded into a user message that holds the summary.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from starlette.responses import Response

from proxy.formats.compaction import answer, compacted, events, is_trigger, item_of, without_trigger
from proxy.headers import response_headers
from proxy.request.context_compaction import Summaries
from proxy.request.planning.plan import Plan
from proxy.upstreams.capabilities import CompactionSupport, unsupported
from proxy.upstreams.forwarding import Reply, decoded
from proxy.wire import WireRequest
from strategies.checkpoints.cut import serialize
from strategies.messages import Message, leading_count
from strategies.tokens import count_prompt

if TYPE_CHECKING:
    from proxy.formats.base import WireFormat
    from proxy.stores.protocol import Store
    from proxy.windows.models import ModelSpec

log = logging.getLogger("contextwarden.compaction")

MAX_ANSWER = 16 << 20  # bytes of an upstream's compaction answer read, at most
FALLBACK_CHARS = 8000  # without a summarizer: the end of the conversation, verbatim
# An answer with one of these says nothing of whether the upstream compacts (a key refused, a
# rate limit, a server busy or down): relayed as it came, and the next compaction is forwarded
# again. Any other answer with no compaction item is answered by the proxy; only an explicit
# "not supported" teaches (proxy/upstreams/capabilities.py).
PASSING = frozenset({401, 403, 408, 409, 429, 502, 503, 504})


def wants_compaction(req: WireRequest) -> bool:
    """Whether ``req`` is a compaction request the proxy may have to answer (one its upstream
    is trusted with goes the ordinary way)."""
    return compaction_trigger(req.fmt, req.spec, req.payload)


def compaction_trigger(fmt: WireFormat, spec: ModelSpec, payload: dict[str, Any]) -> bool:
    """``wants_compaction`` of a request not yet made (proxy/edge/intake.py: an ``Intake``)."""
    upstream = spec.route.upstream
    return (
        fmt.api == "responses"
        and upstream.responses_compaction != "upstream"
        and is_trigger(payload)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Compactions:
    """What answers a compaction request: which upstreams compact (learned, kept in the
    store) and how the proxy's own summary is made."""

    support: CompactionSupport
    store: Store
    summaries: Summaries


async def compaction(
    by: Compactions, req: WireRequest, send: Callable[[Plan], Awaitable[Reply]]
) -> Response:
    """The answer to a compaction request: the proxy's, or its upstream's read whole."""
    route, scope = req.spec.route, req.learns_as or req.team
    if not await by.support.served(scope, route.name, route.upstream, by.store):
        reply = await send(
            Plan(body=req.body, budget=None, actions=["compaction-forwarded"], counted="none")
        )
        body = await _read(reply)
        plain = decoded(body, reply.headers) if body is not None else None
        if plain is not None and reply.status == 200 and compacted(plain):
            return _relayed(reply, body or b"")
        if body is not None and reply.status in PASSING:
            return _relayed(reply, body)
        if plain is not None and unsupported(reply.status, plain, req.body):
            log.info(
                "upstream %s says it does not compact (status %d): the proxy answers the "
                "compactions of %s from now on", route.name, reply.status, scope,
            )  # fmt: skip
            await by.support.learn(scope, route.name, by.store)
        else:
            log.info(
                "upstream %s answered a compaction with no compaction item (status %d): the "
                "proxy answers this one; nothing is learned (only an explicit 'not supported' "
                "is; responses_compaction: proxy skips the ask)", route.name, reply.status,
            )  # fmt: skip
    return await _answered(by.summaries, req)


async def _answered(summaries: Summaries, req: WireRequest) -> Response:
    """The proxy's own answer: one compaction item that carries its summary."""
    payload = without_trigger(req.payload)
    messages = req.fmt.view(payload).messages
    checkpoint, _ = await summaries.handoff(req, messages)
    actions = ["compaction-served"]
    if checkpoint is not None:
        text = checkpoint.summary
        actions.append(f"checkpoint {checkpoint.id}")
    else:
        text = fallback(messages)
        actions.append("summarizer-unavailable")
    counter = req.counter()
    usage = {
        "input": count_prompt(counter, messages),
        "output": counter.message({"role": "assistant", "content": text}),
    }
    response = answer(payload, item_of(text), usage)
    headers = {"x-contextwarden-actions": ",".join(actions)}
    if payload.get("stream"):
        return Response(events(response), 200, headers, media_type="text/event-stream")
    return Response(orjson.dumps(response), 200, headers, media_type="application/json")


def fallback(messages: list[Message]) -> str:
    """Without a summarizer: the end of the conversation after its leading instructions,
    verbatim and said to be so."""
    text = serialize(messages[leading_count(messages) :])
    tail = text[-FALLBACK_CHARS:]
    return (
        "The summarizer was unavailable; this is the end of the conversation so far, verbatim"
        f" ({math.ceil(len(tail) / len(text) * 100) if text else 100}% of it):\n\n{tail}"
    )


async def _read(reply: Reply) -> bytes | None:
    """The whole answer, or None past ``MAX_ANSWER`` bytes."""
    if reply.body is not None:
        return reply.body
    if reply.stream is None:
        return None
    chunks, size = [], 0
    try:
        async for chunk in reply.stream:
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER:
                return None
    finally:
        await reply.aclose()
    return b"".join(chunks)


def _relayed(reply: Reply, body: bytes) -> Response:
    """The upstream's own compaction, byte for byte."""
    headers = [(k, v) for k, v in response_headers(reply.headers) if k.lower() != "content-length"]
    response = Response(body, reply.status)
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    response.raw_headers = [*raw, (b"content-length", str(len(body)).encode())]
    return response
