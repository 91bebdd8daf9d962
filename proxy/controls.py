"""Per-request controls a client may send: the ``contextwarden`` body object and headers.

The body object is always stripped before forwarding (the upstream would reject it); then the
body is re-serialized, every other field kept as it was. A message (or Responses input item)
may carry its own ``"contextwarden": {"pin": true}``: stripped too, and the message is pinned
(kept verbatim: never dropped, trimmed or summarized).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from starlette.datastructures import Headers

from proxy.errors import BadRequest
from proxy.headers import PIN_LAST, POLICY, SESSION_MEMORY, text_header

KNOWN = frozenset({"session_memory", "policy", "trim"})


@dataclass(frozen=True, slots=True)
class Controls:
    session_memory: str | None = None
    policy: str | None = None
    trim: bool = True
    pinned: frozenset[int] = frozenset()  # ids of the (stripped) messages marked to pin
    pin_last: bool = False  # x-contextwarden-pin-last: pin the newest user message


def take_pins(payload: dict[str, Any], key: str) -> tuple[dict[str, Any], frozenset[int], bool]:
    """``payload`` without the per-message ``contextwarden`` markers under ``key``, the ids of
    the messages that asked to be pinned, and whether any marker was there."""
    messages = payload.get(key)
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and "contextwarden" in m for m in messages
    ):
        return payload, frozenset(), False
    out: list[Any] = []
    pinned: set[int] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "contextwarden" not in m:
            out.append(m)
            continue
        marker = m["contextwarden"]
        if (
            not isinstance(marker, dict)
            or set(marker) - {"pin"}
            or not isinstance(marker.get("pin", False), bool)
        ):
            where = f"{key}[{i}].contextwarden"
            raise BadRequest(
                f'\'{where}\' must be {{"pin": true}} or {{"pin": false}}', param=where
            )
        clean = {k: v for k, v in m.items() if k != "contextwarden"}
        if marker.get("pin"):
            pinned.add(id(clean))
        out.append(clean)
    return {**payload, key: out}, frozenset(pinned), True


def take_controls(
    body: bytes, payload: dict[str, Any], headers: Headers, messages_key: str = "messages"
) -> tuple[bytes, dict[str, Any], Controls]:
    """The body and payload to forward, without the ``contextwarden`` object or message
    markers, and the controls."""
    memory = text_header(headers.raw, SESSION_MEMORY)
    policy = text_header(headers.raw, POLICY)
    pin_last = (text_header(headers.raw, PIN_LAST) or "").strip().lower() in ("1", "true")
    payload, pinned, marked = take_pins(payload, messages_key)
    if "contextwarden" not in payload:
        body = orjson.dumps(payload) if marked else body
        return body, payload, Controls(memory or None, policy or None, True, pinned, pin_last)
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
    controls = Controls(value or None, chosen or None, trim, pinned, pin_last)
    return orjson.dumps(rest), rest, controls
