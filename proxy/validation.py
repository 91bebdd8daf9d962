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
        _check_message(message, f"messages[{i}]")
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


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise BadRequest(f"{where} must be an object", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise BadRequest(
            f"{where}.role must be one of {', '.join(sorted(ROLES))} (got {role!r})",
            param=f"{where}.role",
        )
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise BadRequest(f"{where}.content must be a string or an array", param=f"{where}.content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise BadRequest(
                    f"{where}.content[{j}] must be an object with a string 'type'",
                    param=f"{where}.content[{j}]",
                )
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise BadRequest(f"{where}.tool_call_id must be a string", param=f"{where}.tool_call_id")
    calls = message.get("tool_calls")
    if calls is not None:
        _check_tool_calls(calls, f"{where}.tool_calls")


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
