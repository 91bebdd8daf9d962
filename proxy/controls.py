"""Per-request controls a client may send: the ``contextwarden`` body object and headers.

The body object is always stripped before forwarding (the upstream would reject it); then the
body is re-serialized, every other field kept as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from starlette.datastructures import Headers

from proxy.errors import BadRequest
from proxy.headers import POLICY, SESSION_MEMORY, text_header

KNOWN = frozenset({"session_memory", "policy", "trim"})


@dataclass(frozen=True, slots=True)
class Controls:
    session_memory: str | None = None
    policy: str | None = None
    trim: bool = True


def take_controls(
    body: bytes, payload: dict[str, Any], headers: Headers
) -> tuple[bytes, dict[str, Any], Controls]:
    """The body and payload to forward, without the ``contextwarden`` object, and the controls."""
    memory = text_header(headers.raw, SESSION_MEMORY)
    policy = text_header(headers.raw, POLICY)
    if "contextwarden" not in payload:
        return body, payload, Controls(memory or None, policy or None)
    raw = payload["contextwarden"]
    if not isinstance(raw, dict):
        raise BadRequest("'contextwarden' must be an object", param="contextwarden")
    unknown = sorted(set(raw) - KNOWN)
    if unknown:
        raise BadRequest(
            f"unknown contextwarden option(s): {', '.join(unknown)}", param="contextwarden"
        )
    value = raw.get("session_memory", memory)
    chosen = raw.get("policy", policy)
    trim = raw.get("trim", True)
    if value is not None and not isinstance(value, str):
        raise BadRequest("'contextwarden.session_memory' must be a string", param="contextwarden")
    if chosen is not None and not isinstance(chosen, str):
        raise BadRequest("'contextwarden.policy' must be a string", param="contextwarden")
    if not isinstance(trim, bool):
        raise BadRequest("'contextwarden.trim' must be a boolean", param="contextwarden")
    rest = {k: v for k, v in payload.items() if k != "contextwarden"}
    return orjson.dumps(rest), rest, Controls(value or None, chosen or None, trim)
