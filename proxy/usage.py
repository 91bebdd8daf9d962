"""What the upstream says it counted: the prompt usage of an answer read whole, in the request's
own format (``usage.prompt_tokens``, ``usage.input_tokens``, or Anthropic's three input counts).

Compared with the proxy's own count of what it forwarded, it shows how far the proxy's
tokenizer is from the upstream's (``contextwarden_usage_drift_ratio``): a dashboard sees a
tokenizer change, or an estimate that runs low, before requests start to overflow.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.formats.base import WireFormat
from proxy.formats.chat import CHAT
from proxy.plan import Plan
from proxy.upstream import Reply, decoded


def answer(reply: Reply) -> dict[str, Any] | None:
    """A 200 answer read whole, as JSON (None for a stream, an error or another body)."""
    if reply.body is None or reply.status != 200:
        return None
    try:
        data: Any = orjson.loads(decoded(reply.body, reply.headers))
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def prompt_tokens(body: bytes, fmt: WireFormat = CHAT) -> int | None:
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    return fmt.prompt_usage(usage) if isinstance(usage, dict) else None


def drift(reply: Reply, plan: Plan, fmt: WireFormat = CHAT) -> float | None:
    """The upstream's prompt count over ours (tool definitions included), when both exist: an
    answer read whole (short JSON) and a counted plan (not the fast path's upper bound)."""
    if reply.body is None or reply.status != 200 or plan.counted not in ("exact", "estimate"):
        return None
    if plan.tokens_after is None or plan.budget is None:
        return None
    theirs = prompt_tokens(decoded(reply.body, reply.headers), fmt)
    ours = plan.tokens_after + plan.budget.tools
    return theirs / ours if theirs and ours > 0 else None
