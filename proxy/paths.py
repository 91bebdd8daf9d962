"""Which request paths the proxy accepts, and which it forwards.

``SafePaths`` runs before routing, as plain ASGI middleware: a path with a dot segment (``..``,
``.``, or either percent-encoded), an empty segment (``//``), an encoded slash or a backslash is
refused with 400. Nothing downstream ever joins such a path onto an upstream's base URL, so a
client cannot climb out of ``/v1`` to another endpoint of the upstream's host with the proxy's
key, nor reach the chat endpoint by a spelling (``/v1//chat/completions``) that skips fitting.

``forwardable`` is the allowlist for paths the proxy does not fit itself (``keys`` mode): glob
patterns over the path after ``/v1/``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.errors import error_body

# Percent-encoded dot, slash and backslash: the decoded path must be the one the client meant.
_ENCODED = re.compile(rb"%(2e|2f|5c|00)", re.IGNORECASE)

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
    segments = path.split("/")[1:]
    if any(s in ("", ".", "..") for s in segments) and path != "/":
        return "an empty, '.' or '..' segment"
    return None


class SafePaths:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            reason = unsafe_reason(scope["path"], scope.get("raw_path"))
            if reason is not None:
                await _refuse(send, f"the request path has {reason}; send a normalised path")
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, message: str) -> None:
    body = error_body(message, "invalid_request_error", "invalid_path")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def forwardable(subpath: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(subpath, p) for p in patterns)
