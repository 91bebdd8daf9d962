"""Reading and checking a chat-completion body before anything else touches it.

Only what the proxy relies on is checked (the model, the shape of messages, the output limits);
everything else is the upstream's business and passes through untouched.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import orjson
from starlette.requests import Request

from proxy.errors import BadRequest, PayloadTooLarge

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
MAX_DEPTH = 254  # what orjson can write back
ROOT_WATCHED = (
    "model",
    "messages",
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "tools",
    "functions",
    "contextwarden",
)
MESSAGE_WATCHED = ("role", "content", "tool_calls", "tool_call_id", "function_call")


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes is over the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_chat(body: bytes) -> dict[str, Any]:
    """The parsed body, or BadRequest naming the first thing wrong with it."""
    payload = parse_json(body)
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required and must be a non-empty string", param="model")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' is required and must be a non-empty array", param="messages")
    for i, message in enumerate(messages):
        _check_message(message, i)
    for key in ("max_tokens", "max_completion_tokens"):
        _check_positive_int(payload.get(key), key)
    if "stream" in payload and not isinstance(payload["stream"], bool | None):
        raise BadRequest("'stream' must be a boolean", param="stream")
    _check_tools(payload.get("tools"))
    _check_functions(payload.get("functions"))
    reject_duplicate_keys(body, payload)
    return payload


def parse_json(body: bytes) -> dict[str, Any]:
    """A JSON object the proxy can also write back: orjson reads 1024 levels of nesting but
    writes only 254, so a deeper body is refused here, before anything acts on it."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH:  # else it cannot be that deep
        try:
            orjson.dumps(payload)
        except orjson.JSONEncodeError:
            message = f"the request body is nested more than {MAX_DEPTH} levels deep"
            raise BadRequest(message) from None
    return payload


def reject_duplicate_keys(body: bytes, payload: dict[str, Any]) -> None:
    """400 when a key the proxy acts on appears twice in one object: orjson keeps the last one
    while the upstream, given the original bytes, might take the first, so the proxy would check
    one ``model`` and forward another.

    The exact check re-parses with the stdlib's hook, so it runs only when a cheap count says a
    duplicate is possible: a key spelled with an escape, or a watched key in the raw bytes more
    often than the parsed objects hold it (inside strings quotes are escaped, so ``"model"``
    only matches a key or a whole string value). One regex pass counts every watched key."""
    if b"\\u" in body or _more_in_raw(body, payload):
        try:
            json.loads(body, object_pairs_hook=_unique)
        except _Duplicate as exc:
            message = f"the key {exc.key!r} appears twice in one object"
            raise BadRequest(message, param=exc.key) from None


_WATCHED = re.compile(
    rb'"(' + b"|".join(re.escape(k.encode()) for k in (*ROOT_WATCHED, *MESSAGE_WATCHED)) + rb')"'
)


def _more_in_raw(body: bytes, payload: dict[str, Any]) -> bool:
    raw = Counter(_WATCHED.findall(body))
    messages = payload.get("messages")
    objects = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    for key, n in raw.items():
        name = key.decode()
        held = int(name in payload) + sum(1 for m in objects if name in m)
        if n > held:
            return True
    return False


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    return out


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be an array of objects", param="tools")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise BadRequest(f"{where} must be an object", param=where)
        if tool.get("type", "function") == "function" or "function" in tool:
            _check_function_def(tool.get("function"), f"{where}.function")


def _check_functions(functions: Any) -> None:
    if functions is None:
        return
    if not isinstance(functions, list):
        raise BadRequest("'functions' must be an array of objects", param="functions")
    for i, fn in enumerate(functions):
        _check_function_def(fn, f"functions[{i}]")


def _check_function_def(fn: Any, where: str) -> None:
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BadRequest(f"{where} must be an object with a string 'name'", param=where)
    for key in ("description",):
        if fn.get(key) is not None and not isinstance(fn[key], str):
            raise BadRequest(f"{where}.{key} must be a string", param=f"{where}.{key}")
    if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
        raise BadRequest(f"{where}.parameters must be an object", param=f"{where}.parameters")


def _check_message(message: Any, i: int) -> None:
    """Cheap checks first; the error (with the path of the bad field) only when one fails."""
    if type(message) is not dict:
        raise BadRequest(f"messages[{i}] must be an object", param=f"messages[{i}]")
    role = message.get("role")
    if type(role) is not str or role not in ROLES:
        raise BadRequest(
            f"messages[{i}].role must be one of {', '.join(sorted(ROLES))} (got {role!r})",
            param=f"messages[{i}].role",
        )
    content = message.get("content")
    if content is not None and type(content) is not str:
        _check_parts(content, i)
    if role == "tool" and type(message.get("tool_call_id")) is not str:
        where = f"messages[{i}].tool_call_id"
        raise BadRequest(f"{where} must be a string", param=where)
    calls = message.get("tool_calls")
    if calls is not None:
        _check_tool_calls(calls, f"messages[{i}].tool_calls")
    call = message.get("function_call")
    if call is not None:
        if not isinstance(call, dict):
            where = f"messages[{i}].function_call"
            raise BadRequest(f"{where} must be an object", param=where)
        _check_call(call, f"messages[{i}].function_call")
    name = message.get("name")
    if name is not None and type(name) is not str:
        raise BadRequest(f"messages[{i}].name must be a string", param=f"messages[{i}].name")


def _check_parts(content: Any, i: int) -> None:
    where = f"messages[{i}].content"
    if not isinstance(content, list):
        raise BadRequest(f"{where} must be a string or an array", param=where)
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise BadRequest(f"{at} must be an object with a string 'type'", param=at)
        _check_part(part, at)


def _check_part(part: dict[str, Any], at: str) -> None:
    """The fields the proxy counts or reads, by the part's type; other parts pass as they are."""
    kind = part["type"]
    if "text" in part and not isinstance(part["text"], str):
        raise BadRequest(f"{at}.text must be a string", param=f"{at}.text")
    if kind == "text" and "text" not in part:
        raise BadRequest(f"{at} is a text part without 'text'", param=f"{at}.text")
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str):
            raise BadRequest(
                f"{at}.image_url must be a URL string or an object with a string 'url'",
                param=f"{at}.image_url",
            )
        detail = image.get("detail") if isinstance(image, dict) else None
        if detail is not None and not isinstance(detail, str):
            raise BadRequest(f"{at}.image_url.detail must be a string", param=f"{at}.image_url")


def _check_tool_calls(calls: Any, where: str) -> None:
    if not isinstance(calls, list):
        raise BadRequest(f"{where} must be an array", param=where)
    for k, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("id"), str)
            or not isinstance(fn, dict)
        ):
            raise BadRequest(
                f"{where}[{k}] must be an object with a string 'id' and a 'function'",
                param=f"{where}[{k}]",
            )
        _check_call(fn, f"{where}[{k}].function")


def _check_call(fn: dict[str, Any], where: str) -> None:
    """A call's function: a string name and string arguments (JSON text, as the API sends)."""
    for key in ("name", "arguments"):
        if not isinstance(fn.get(key), str):
            raise BadRequest(f"{where}.{key} must be a string", param=f"{where}.{key}")


def _check_positive_int(value: Any, key: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{key}' must be a positive integer", param=key)


def check_request_basics(payload: dict[str, Any], anthropic: bool = False) -> None:
    """``model``, ``stream`` and ``tools`` as every fitted format takes them, in the client's
    own wording (Anthropic's ``field: problem``, else OpenAI's ``'field' ...``)."""

    def say(field: str, problem: str) -> str:
        return f"{field}: {problem}" if anthropic else f"'{field}' {problem}"

    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest(say("model", "is required and must be a non-empty string"), param="model")
    if "stream" in payload and not isinstance(payload["stream"], bool | None):
        raise BadRequest(say("stream", "must be a boolean"), param="stream")
    tools = payload.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    ):
        raise BadRequest(say("tools", "must be an array of objects"), param="tools")
