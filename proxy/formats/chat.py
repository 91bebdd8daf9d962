"""Chat completions: the engine's own shape, so the view is the messages themselves; parsing
checks what the proxy relies on (the model, the shape of messages and tool calls, the output
limits)."""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest
from proxy.formats.base import (
    View,
    check_positive_int,
    check_writable,
    load_items,
    lowered,
    reject_duplicate_keys,
    usage_int,
)
from proxy.formats.reused_items import Reuse
from proxy.upstreams.forwarding import chat_stream_error
from strategies.budget import CHAT_OUTPUT_KEYS, requested_output
from strategies.messages import Message

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


class ChatFormat:
    name = "chat"
    api = "chat_completions"
    path = "chat/completions"
    messages_param = "messages"

    def parse(self, body: bytes, reuse: Reuse | None = None) -> dict[str, Any]:
        return parse_chat(body, reuse)

    def view(self, payload: dict[str, Any], reuse: Reuse | None = None) -> View:
        messages: list[Message] = payload["messages"]
        if reuse is not None:
            reuse.viewing(messages)  # the messages are their own view: nothing more to keep
        return View(messages=messages, items=len(messages))

    def requested_output(self, payload: dict[str, Any]) -> int | None:
        return requested_output(payload)

    def with_output(self, payload: dict[str, Any], limit: int) -> dict[str, Any]:
        return lowered(payload, CHAT_OUTPUT_KEYS, limit)

    def stateful(self, payload: dict[str, Any]) -> bool:
        return False

    def prompt_usage(self, usage: dict[str, Any]) -> int | None:
        return usage_int(usage, "prompt_tokens")

    def stream_error(self, message: str) -> bytes:
        return chat_stream_error(message)

    def write(self, payload: dict[str, Any], view: View, kept: list[Message]) -> dict[str, Any]:
        return {**payload, "messages": kept}


CHAT = ChatFormat()


def parse_chat(body: bytes, reuse: Reuse | None = None) -> dict[str, Any]:
    """The parsed body, or BadRequest naming the first thing wrong with it. With ``reuse``, the
    leading messages an earlier request of the conversation sent as they are (and so passed
    these checks) are not checked again (proxy/formats/reused_items.py)."""
    payload, known = load_items(body, "messages", reuse)
    written = check_writable(body, payload, reuse)
    messages = payload.get("messages")
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required and must be a non-empty string", param="model")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' is required and must be a non-empty array", param="messages")
    for i in range(known, len(messages)):
        _check_message(messages[i], i)
    for key in ("max_tokens", "max_completion_tokens"):
        check_positive_int(payload.get(key), key)
    if "stream" in payload and not isinstance(payload["stream"], bool | None):
        raise BadRequest("'stream' must be a boolean", param="stream")
    _check_tools(payload.get("tools"))
    _check_functions(payload.get("functions"))
    reject_duplicate_keys(body, payload, reuse, written)
    return payload


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
