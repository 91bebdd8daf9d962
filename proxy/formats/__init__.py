"""The wire formats, each an adapter over the one engine (see base.py):

    base.py              the View the engine trims, the WireFormat protocol, and the strict
                         JSON reading every format shares
    chat.py              chat completions: the engine's own shape, and its checks
    responses.py         OpenAI Responses (``/v1/responses``); responses_items.py: its items;
                         compaction.py: its compaction requests and items (Codex's), answered
                         and expanded by the proxy; responses_context.py: its
                         context_management compaction, served for an upstream without it
    anthropic.py         Anthropic Messages (``/v1/messages``); anthropic_checks.py: its
                         request checks; anthropic_cache.py: its cache breakpoints on a trim;
                         anthropic_edits.py: its context editing, served or stripped for an
                         upstream without it; anthropic_compaction.py: its compaction (the
                         compact edit, the parameter, the blocks), served the same way
    completions.py       the legacy ``POST /v1/completions``: a ``prompt`` (a string, strings,
                         token ids) cut at token boundaries, middle-out by default
    reused_items.py      each conversation's last request's items: the next request's equal
                         leading items become those objects, checked and viewed once;
                         item_spans.py: where a compact body holds its items, byte for byte
    recall.py            the recall tool in each format: offered, its calls read from an
                         answer (whole or streamed), answered by continuing the request
    references.py        content a request names without carrying it (a file by id, a PDF):
                         uncountable, so it teaches nothing about a window

A new format is a new adapter module and its tests: the request path
(proxy/edge/exchange.py), the planner, the budget rule, the overflow retry and the headers
take any WireFormat.
"""

from __future__ import annotations

from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.base import WireFormat
from proxy.formats.chat import CHAT
from proxy.formats.responses import RESPONSES

FORMATS: dict[str, WireFormat] = {"chat": CHAT, "responses": RESPONSES, "anthropic": ANTHROPIC}


ANTHROPIC_ONLY_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def format_of(payload: object) -> WireFormat:
    """The format a body is written in, from its shape (for the preview, which is not told by
    a path): ``input`` is Responses; ``messages`` with a top-level ``system`` or Anthropic-only
    blocks is Messages; anything else is chat."""
    if not isinstance(payload, dict):
        return CHAT
    if "input" in payload and "messages" not in payload:
        return RESPONSES
    messages = payload.get("messages")
    if "system" in payload:
        return ANTHROPIC
    if isinstance(messages, list):
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") in ANTHROPIC_ONLY_BLOCKS for b in content
            ):
                return ANTHROPIC
    return CHAT
