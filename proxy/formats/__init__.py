"""The wire formats, each an adapter over the one engine (see base.py):

    base.py              the View the engine trims, the WireFormat protocol, and the strict
                         JSON reading every format shares
    chat.py              chat completions: the engine's own shape, and its checks
    responses.py         OpenAI Responses (``/v1/responses``); responses_items.py: its items
    anthropic.py         Anthropic Messages (``/v1/messages``)
    completions.py       the legacy ``POST /v1/completions``: a ``prompt`` (a string, strings,
                         token ids) cut at token boundaries, middle-out by default

A new format is a new adapter module and its tests: the request path (proxy/exchange.py), the
planner, the budget rule, the overflow retry and the headers take any WireFormat.
"""

from __future__ import annotations

from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.base import WireFormat
from proxy.formats.chat import CHAT
from proxy.formats.responses import RESPONSES

FORMATS: dict[str, WireFormat] = {"chat": CHAT, "responses": RESPONSES, "anthropic": ANTHROPIC}
