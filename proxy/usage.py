"""What the upstream says it counted: ``usage.prompt_tokens`` in an answer read whole.

Compared with the proxy's own count of what it forwarded, it shows how far the proxy's
tokenizer is from the upstream's (``contextwarden_usage_drift_ratio``): a dashboard sees a
tokenizer change, or an estimate that runs low, before requests start to overflow.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.plan import Plan
from proxy.upstream import Reply, decoded


def prompt_tokens(body: bytes) -> int | None:
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def drift(reply: Reply, plan: Plan) -> float | None:
    """The upstream's prompt count over ours (tool definitions included), when both exist: an
    answer read whole (short JSON) and a counted plan (not the fast path's upper bound)."""
    if reply.body is None or reply.status != 200 or plan.counted not in ("exact", "estimate"):
        return None
    if plan.tokens_after is None or plan.budget is None:
        return None
    theirs = prompt_tokens(decoded(reply.body, reply.headers))
    ours = plan.tokens_after + plan.budget.tools
    return theirs / ours if theirs and ours > 0 else None
