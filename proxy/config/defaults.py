"""The embedded default: what ``contextwarden serve`` serves with no file, and what a file that
configures no ``upstreams:`` is served with.

Two upstreams, from the variables the clients themselves read: ``openai`` (chat and Responses)
at ``OPENAI_BASE_URL``, with ``OPENAI_API_KEY`` if it is set, and ``anthropic`` (Messages) at
``ANTHROPIC_BASE_URL``, where each caller's own key goes (``x-api-key``, or Claude Code's
sign-in). ``claude-*`` is routed to ``anthropic``; every other model goes to ``openai``. The
base URLs mean what they mean to the SDKs: OpenAI's includes ``/v1``, Anthropic's does not.
"""

from __future__ import annotations

import os
from typing import Any

OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
CLAUDE = "claude-*"


def default_upstreams() -> dict[str, dict[str, Any]]:
    anthropic = os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL
    return {
        "openai": {
            "base_url": os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL,
            "api_key_env": "OPENAI_API_KEY",
        },
        "anthropic": {"provider": "anthropic", "base_url": anthropic.rstrip("/") + "/v1"},
    }


def with_default_upstreams(data: dict[str, Any]) -> bool:
    """Give a file that configures no upstreams the embedded default's, with ``claude-*``
    routed to ``anthropic`` unless its ``models:`` says otherwise; whether it did."""
    if "upstreams" in data:
        return False
    data["upstreams"] = default_upstreams()
    models = data.get("models")
    if models is None:
        data["models"] = {CLAUDE: {"upstream": "anthropic"}}
    elif isinstance(models, dict) and CLAUDE not in models:
        data["models"] = {CLAUDE: {"upstream": "anthropic"}, **models}
    return True


def origin_of(upstream: str, base_url: str | None) -> str | None:
    """The variable an embedded upstream's address came from, when it did."""
    name = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}.get(upstream)
    value = os.environ.get(name) if name else None
    if not name or not value or base_url is None:
        return None
    same = base_url in (value, value.rstrip("/") + "/v1")
    return name if same else None
