"""The fields of a forwarded body the proxy acts on (its ``model``, the paid options a team may
be refused, the stored objects it names), read whatever type the body declares.

An upstream reads a body by its content, not only by its declared type: a JSON body sent as
``text/plain`` is read as JSON by many OpenAI-compatible servers, and the multipart uploads
(``/v1/images/edits``, ``/v1/audio/transcriptions``) carry ``model`` and ``n`` as form fields.
A check that read only ``application/json`` let a team with no paid options ask for ``n=10``,
or name another team's response, by declaring another type. So:

- a body declared JSON, or opening like a JSON object, is read as JSON (an invalid one declared
  JSON is a 400; one that only looks like it is the upstream's to refuse);
- an urlencoded or multipart form is read for its fields (a file part is skipped unread); a
  number or a boolean in a field is read as the JSON value it spells, so that ``n=1`` is no
  paid option and ``n=10`` is;
- a field the proxy acts on given twice is a 400, as a key twice in a JSON object is: the
  proxy would check one and the upstream might take the other.
"""

from __future__ import annotations

import email.parser
import email.policy
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

import orjson

from proxy.errors import BadRequest
from proxy.formats.base import reject_duplicate_keys


def fields_of(
    body: bytes | None, content_type: str, acted_on: Iterable[str]
) -> dict[str, Any] | None:
    """The body's fields (all of a JSON object's; a form's, by name); None when it has none
    the proxy can read (no body, another type, JSON that is no object)."""
    if not body:
        return None
    kind = content_type.split(";", 1)[0].strip().lower()
    if "json" in kind:
        return _json(body, declared=True)
    if kind == "application/x-www-form-urlencoded":
        text = body.decode("utf-8", "replace")
        return _form(parse_qsl(text, keep_blank_values=True), set(acted_on))
    if kind == "multipart/form-data":
        return _form(_parts(body, content_type), set(acted_on))
    if body.lstrip()[:1] == b"{":
        return _json(body, declared=False)
    return None


def _json(body: bytes, declared: bool) -> dict[str, Any] | None:
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        if declared:
            raise BadRequest("the request body is not valid JSON") from None
        return None
    if not isinstance(payload, dict):
        return None
    reject_duplicate_keys(body, payload)
    return payload


def _form(pairs: Iterable[tuple[str, str]], acted_on: set[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in pairs:
        if name in fields and name in acted_on:
            raise BadRequest(f"the form field '{name}' is given twice", param=name)
        fields[name] = _value(value)
    return fields


def _value(text: str) -> Any:
    """A form field's value as the JSON value it spells (a number, a boolean, null), else the
    text itself."""
    stripped = text.strip()
    if stripped in ("true", "false", "null") or stripped.lstrip("-").isdigit():
        try:
            return orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return text
    return text


def _parts(body: bytes, content_type: str) -> list[tuple[str, str]]:
    """A multipart form's (name, value) fields; file parts are skipped."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise BadRequest("the multipart body could not be read (its boundary is missing)")
    fields = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or part.get_filename() is not None:
            continue
        payload = part.get_payload(decode=True)
        value = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
        fields.append((name, value))
    return fields
