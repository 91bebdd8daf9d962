"""Errors a client can see, rendered once in OpenAI's shape.

ProxyError (status, type, code, param)
 ├── BadRequest            400 invalid_request_error
 │    └── ContextTooLarge  400 context_length_exceeded: cannot be made to fit
 ├── Unauthorized          401 authentication_error: no key, an unknown key or team
 ├── Forbidden             403 permission_error: a model, path, policy or control not allowed
 ├── NotFound              404 not_found_error: an admin call names nothing the proxy holds
 ├── NoRoute               404 or 405 invalid_request_error: no such path, or not that method
 ├── PayloadTooLarge       413 the body is over the configured limit
 ├── UpstreamUnavailable   502 the upstream could not be reached
 └── UpstreamTimeout       504 the upstream did not answer in time

Anthropic Messages clients get the same errors in Anthropic's shape (``anthropic_body``).

``Invariant`` is no client's error: the proxy's own code found a state it rules out (what an
``assert`` would check, but kept under ``python -O``). It is a bug; the top-level handler
(proxy/app.py) logs it with its traceback and answers a plain 500 in the client's shape.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response


class ProxyError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers: list[tuple[str, str]] = []  # x-contextwarden-* on a refused request
        if code is not None:
            self.code = code

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.code, self.param)


class BadRequest(ProxyError):
    status = 400
    type = "invalid_request_error"


class ContextTooLarge(BadRequest):
    code = "context_length_exceeded"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        tokens: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message, param=param)
        self.tokens = tokens  # what had to be kept, and the room it had, when known
        self.limit = limit
        # The figures of the x-contextwarden-* headers, when the proxy counted: the request's
        # messages, what the part that must be kept takes, the budget for messages.
        self.before: int | None = None
        self.kept: int | None = None
        self.budget: int | None = None
        self.counted = "none"


class Unauthorized(ProxyError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(ProxyError):
    status = 403
    type = "permission_error"
    code = "model_not_allowed"


class NotFound(ProxyError):
    status = 404
    type = "not_found_error"
    code = "not_found"


class NoRoute(ProxyError):
    """A path the proxy does not serve (404), or a method its path does not take (405); the
    paths under /v1/ it does not fit go to the upstream, which answers for them."""

    type = "invalid_request_error"

    def __init__(self, status: int, method: str, path: str) -> None:
        what = "Invalid URL" if status == 404 else "Method not allowed"
        super().__init__(f"{what} ({method} {path})")  # OpenAI's words for an unknown URL
        self.status = status


class PayloadTooLarge(ProxyError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class UpstreamUnavailable(ProxyError):
    status = 502
    type = "upstream_error"
    code = "upstream_unavailable"


class UpstreamTimeout(ProxyError):
    status = 504
    type = "upstream_error"
    code = "upstream_timeout"


class Invariant(Exception):
    """A state the proxy's code rules out, met all the same (a bug): raised where an
    ``assert`` would stand, which ``python -O`` would drop."""


def error_body(message: str, type_: str, code: str | None, param: str | None = None) -> bytes:
    return orjson.dumps(
        {"error": {"message": message, "type": type_, "code": code, "param": param}}
    )


def error_response(
    exc: ProxyError, headers: dict[str, str] | None = None, shape: str = "openai"
) -> Response:
    """``exc`` in the client's own error shape: OpenAI's, or Anthropic's for Messages clients."""
    merged = {**dict(exc.headers), **(headers or {})}
    body = anthropic_body(exc) if shape == "anthropic" else exc.body()
    return Response(body, exc.status, headers=merged, media_type="application/json")


ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_body(exc: ProxyError) -> bytes:
    """Anthropic's shape, ``{"type": "error", "error": {"type", "message"}}``. A request that
    cannot be made to fit says "prompt is too long", the words Claude Code compacts on."""
    message = exc.message
    if isinstance(exc, ContextTooLarge):
        if exc.tokens is not None and exc.limit is not None:
            message = f"prompt is too long: {exc.tokens} tokens > {exc.limit} maximum ({message})"
        else:
            message = f"prompt is too long: {message}"
    kind = ANTHROPIC_TYPES.get(exc.status, "api_error")
    return anthropic_error(kind, message)


def anthropic_error(kind: str, message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
