"""What one request did (``Outcome``), recorded once by proxy/observe/metrics.py: as the
request path made it, or as a shadow plan would have (proxy/observe/shadow.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strategies.cost import PromptCosts


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What one request did, for metrics and the access log."""

    team: str
    model: str
    status: int
    tokens_before: int | None
    tokens_after: int | None
    actions: list[str]
    retries: int
    checkpoint: str | None
    overhead: float
    upstream: float
    stream: bool
    policy: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    path: str = "chat/completions"  # a forwarded path's allowlist pattern, or its first segment
    format: str = "chat"  # the wire format: chat, completions, responses, anthropic, or "-"
    prefix: str | None = None  # kept, broken or new (request/conversations.py); None: not fitted
    cached_tokens: int = 0  # the previous prompt's tokens, when kept as the prefix
    costs: PromptCosts | None = None  # estimated prompt dollars, for a model with prices
