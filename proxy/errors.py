"""Errors a client can see, rendered once in OpenAI's shape.

ProxyError (status, type, code, param)
 ├── BadRequest            400 invalid_request_error
 │    └── ContextTooLarge  400 context_length_exceeded: cannot be made to fit
 ├── Unauthorized          401 authentication_error: no key, an unknown key or team
 ├── Forbidden             403 permission_error: a model, path, policy or control not allowed
 ├── PayloadTooLarge       413 the body is over the configured limit
 ├── UpstreamUnavailable   502 the upstream could not be reached
 └── UpstreamTimeout       504 the upstream did not answer in time
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


class Unauthorized(ProxyError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(ProxyError):
    status = 403
    type = "permission_error"
    code = "model_not_allowed"


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


def error_body(message: str, type_: str, code: str | None, param: str | None = None) -> bytes:
    return orjson.dumps(
        {"error": {"message": message, "type": type_, "code": code, "param": param}}
    )


def error_response(exc: ProxyError, headers: dict[str, str] | None = None) -> Response:
    merged = {**dict(exc.headers), **(headers or {})}
    return Response(exc.body(), exc.status, headers=merged, media_type="application/json")
