"""Which request paths the proxy accepts, and which it forwards.

``SafePaths`` runs before routing, as plain ASGI middleware: a path with a dot segment (``..``,
``.``, or either percent-encoded), an empty segment (``//``), an encoded slash or a backslash, a
percent sign left after decoding (a double-encoded path such as ``%252e%252e``), an encoded ``?``
or ``#``, or a control character is refused with 400. Nothing downstream ever joins such a path
onto an upstream's base URL, so a client cannot climb out of ``/v1`` to another endpoint of the
upstream's host with the proxy's key, nor reach the chat endpoint by a spelling
(``/v1//chat/completions``) that skips fitting.

**One canonical form.** What the proxy checks (routing, the allowlist) is the decoded path; what
the upstream receives is that same path percent-encoded exactly once (``canonical``), and the
transports send it as it is, never decoding or normalising it again (see
``proxy/upstreams/aiohttp_transport.py``). So the path that was checked is the path that is served.

``forwardable`` is the allowlist for paths the proxy does not fit itself (``keys`` mode): glob
patterns over the path after ``/v1/``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.errors import Invariant, anthropic_error, error_body

# Percent-encoded dot, slash and backslash: the decoded path must be the one the client meant.
_ENCODED = re.compile(rb"%(2e|2f|5c|00)", re.IGNORECASE)
# After decoding: a percent sign (the path was encoded twice), a query or fragment delimiter that
# came encoded, or a control character.
_DECODED = re.compile(r"[%?#\x00-\x1f\x7f]")
# What stays unescaped in a path segment (RFC 3986 pchar less the percent sign).
_PCHAR = "/-._~!$&'()*+,;=:@"

# Model-serving endpoints a team may reach by default; org-wide ones (files, batches,
# fine-tuning, vector stores, assistants...) only when the operator lists them.
DEFAULT_FORWARD = (
    "embeddings",
    "moderations",
    "audio/*",
    "images/*",
    "responses",
    "responses/input_tokens",
    "messages",
    "messages/count_tokens",
)


def unsafe_reason(path: str, raw_path: bytes | None) -> str | None:
    """Why ``path`` may not be routed, or None when it is a plain path."""
    if "\\" in path or "\x00" in path:
        return "a backslash or NUL byte"
    if raw_path is not None and _ENCODED.search(raw_path):
        return "a percent-encoded dot, slash, backslash or NUL"
    if _DECODED.search(path):
        return (
            "a percent sign after decoding (double encoding), an encoded '?' or '#', or a "
            "control character"
        )
    segments = path.split("/")[1:]
    if any(s in ("", ".", "..") for s in segments) and path != "/":
        return "an empty, '.' or '..' segment"
    return None


class SafePaths:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            reason = unsafe_reason(scope["path"], scope.get("raw_path"))
            if reason is not None:
                message = f"the request path has {reason}; send a normalised path"
                anthropic = is_messages_path(scope["path"])
                kind, code = "invalid_request_error", "invalid_path"
                await refuse(send, 400, message, anthropic, kind, code, scope, receive)
                return
        await self.app(scope, receive, send)


def is_messages_path(path: str) -> bool:
    """An Anthropic Messages path, whose clients read Anthropic's error shape."""
    return path.startswith(("/v1/messages", "/messages"))


async def refuse(
    send: Send,
    status: int,
    message: str,
    anthropic: bool,
    kind: str,
    code: str,
    scope: Scope | None = None,
    receive: Receive | None = None,
) -> None:
    """An error answered by ASGI middleware, before routing, in the client's own shape. A
    WebSocket handshake (``scope``) gets it as the server's denial response, or is closed
    unaccepted where the server cannot send one."""
    body = anthropic_error(kind, message) if anthropic else error_body(message, kind, code)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    prefix = "http"
    if scope is not None and scope["type"] == "websocket":
        if receive is None:
            raise Invariant("a WebSocket refused without its receive channel")
        await receive()  # websocket.connect
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008})
            return
        prefix = "websocket.http"
    await send({"type": f"{prefix}.response.start", "status": status, "headers": headers})
    await send({"type": f"{prefix}.response.body", "body": body})


def canonical(path: str) -> str:
    """The decoded ``path`` as the upstream receives it: percent-encoded once (non-ASCII as
    UTF-8), every character with a meaning in a URL other than ``/`` escaped."""
    return quote(path, safe=_PCHAR)


def query_of(scope: Mapping[str, Any]) -> str:
    """The request's query string as the client sent it: decoded as UTF-8, any byte that is not
    kept as a surrogate, which the HTTP/1.1 transport writes back as that byte."""
    raw: bytes = scope.get("query_string", b"")
    return raw.decode("utf-8", "surrogateescape")


def forwardable(subpath: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(subpath, p) for p in patterns)
