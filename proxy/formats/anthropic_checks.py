"""Anthropic Messages request checks, in the API's own terms: what the proxy must be able to
rely on before it trims (shapes, roles, ids, and each ``tool_use`` answered first thing in the
next user message)."""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest

ROLES = ("user", "assistant")


def check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list) or not all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in system
    ):
        raise BadRequest("system: must be a string or an array of text blocks", param="system")


def check_messages(messages: Any, known: int = 0) -> None:
    """BadRequest naming the first thing wrong; the first ``known`` messages passed these
    checks in an earlier request (proxy/formats/reused_items.py): only how calls pair is checked
    again over them."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: must be a non-empty array", param="messages")
    for i in range(known, len(messages)):
        m = messages[i]
        where = f"messages.{i}"
        if not isinstance(m, dict):
            raise BadRequest(f"{where}: must be an object", param=where)
        # Roles besides user and assistant (Claude Code's mid-conversation ``system``) are the
        # upstream's to judge: forwarded as they are, in their place.
        role = m.get("role")
        if role is None:
            raise BadRequest(f"{where}.role: Field required", param=f"{where}.role")
        if not isinstance(role, str) or not role:
            got = "empty" if role == "" else type(role).__name__
            raise BadRequest(
                f"{where}.role: must be a non-empty string (got {got})", param=f"{where}.role"
            )
        content = m.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise BadRequest(
                f"{where}.content: must be a string or an array of blocks",
                param=f"{where}.content",
            )
        for k, block in enumerate(content):
            if m["role"] in ROLES:
                _check_block(block, m["role"], f"{where}.content.{k}")
            elif not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise BadRequest(f"{where}.content.{k}: must be an object with a type", param=where)
    # A pair within the known messages was checked with them (the last known one's next
    # message may be new).
    _check_pairs(messages, max(0, known - 1))


def _check_block(block: Any, role: str, where: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise BadRequest(f"{where}: must be an object with a type", param=where)
    kind = block["type"]
    if kind == "tool_use":
        if role != "assistant":
            raise BadRequest(f"{where}: tool_use blocks belong to assistant messages", param=where)
        if not isinstance(block.get("id"), str) or not block["id"]:
            raise BadRequest(f"{where}.id: Field required", param=f"{where}.id")
    elif kind == "tool_result":
        if role != "user":
            raise BadRequest(f"{where}: tool_result blocks belong to user messages", param=where)
        if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
            raise BadRequest(f"{where}.tool_use_id: Field required", param=f"{where}.tool_use_id")
        content = block.get("content")
        if content is not None and not isinstance(content, str | list):
            raise BadRequest(
                f"{where}.content: must be a string or an array", param=f"{where}.content"
            )
        if isinstance(content, list) and not all(
            isinstance(b, dict) and isinstance(b.get("type"), str) for b in content
        ):
            raise BadRequest(f"{where}.content: blocks must have a type", param=f"{where}.content")
    elif kind == "text" and not isinstance(block.get("text"), str):
        raise BadRequest(f"{where}.text: must be a string", param=f"{where}.text")


def _check_pairs(messages: list[dict[str, Any]], start: int = 0) -> None:
    """The API's rule: every ``tool_use`` is answered by a ``tool_result`` in the next message,
    and those results come first in it; no result answers a call that was not just made.
    From message ``start`` on."""
    for i in range(start, len(messages)):
        m = messages[i]
        content = m["content"] if isinstance(m["content"], list) else []
        uses = (
            [b["id"] for b in content if b["type"] == "tool_use"]
            if m["role"] == "assistant"
            else []
        )
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        answers = _leading_results(nxt) if nxt is not None and nxt["role"] == "user" else []
        missing = [u for u in uses if u not in answers]
        if missing:
            raise BadRequest(
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.",
                param=f"messages.{i + 1}",
            )
        if m["role"] == "user":
            before = messages[i - 1] if i > 0 else None
            called = (
                {b["id"] for b in before["content"] if b["type"] == "tool_use"}
                if before is not None and isinstance(before["content"], list)
                else set()
            )
            for k, b in enumerate(content):
                if b["type"] == "tool_result" and b["tool_use_id"] not in called:
                    raise BadRequest(
                        f"messages.{i}.content.{k}: unexpected `tool_use_id` found in "
                        "`tool_result` blocks: "
                        f"{b['tool_use_id']}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message.",
                        param=f"messages.{i}.content.{k}",
                    )
            if any(b["type"] == "tool_result" for b in content[len(_leading_results(m)) :]):
                raise BadRequest(
                    f"messages.{i}: tool_result blocks must come first in the message content",
                    param=f"messages.{i}",
                )


def _leading_results(m: dict[str, Any]) -> list[str]:
    content = m["content"] if isinstance(m["content"], list) else []
    out = []
    for b in content:
        if b["type"] != "tool_result":
            break
        out.append(b["tool_use_id"])
    return out
