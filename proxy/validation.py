"""Reading and checking a chat-completion body before anything else touches it.

Only what the proxy relies on is checked (the model, the shape of messages, the output limits);
everything else is the upstream's business and passes through untouched.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from proxy.errors import BadRequest, PayloadTooLarge

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


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
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadRequest("the request body must be a JSON object")
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
    tools = payload.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    ):
        raise BadRequest("'tools' must be an array of objects", param="tools")
    return payload


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


def _check_parts(content: Any, i: int) -> None:
    where = f"messages[{i}].content"
    if not isinstance(content, list):
        raise BadRequest(f"{where} must be a string or an array", param=where)
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise BadRequest(
                f"{where}[{j}] must be an object with a string 'type'", param=f"{where}[{j}]"
            )


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


def _check_positive_int(value: Any, key: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{key}' must be a positive integer", param=key)
