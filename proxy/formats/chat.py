"""Chat completions: the engine's own shape, so the view is the messages themselves."""

from __future__ import annotations

from typing import Any

from proxy.formats.base import View, usage_int
from proxy.validation import parse_chat
from strategies.budget import requested_output
from strategies.messages import Message


class ChatFormat:
    name = "chat"
    api = "chat_completions"
    path = "chat/completions"
    messages_param = "messages"

    def parse(self, body: bytes) -> dict[str, Any]:
        return parse_chat(body)

    def view(self, payload: dict[str, Any]) -> View:
        messages: list[Message] = payload["messages"]
        return View(messages, items=len(messages))

    def requested_output(self, payload: dict[str, Any]) -> int | None:
        return requested_output(payload)

    def stateful(self, payload: dict[str, Any]) -> bool:
        return False

    def prompt_usage(self, usage: dict[str, Any]) -> int | None:
        return usage_int(usage, "prompt_tokens")

    def write(self, payload: dict[str, Any], view: View, kept: list[Message]) -> dict[str, Any]:
        return {**payload, "messages": kept}


CHAT = ChatFormat()
