"""Shared fixtures: tiktoken from litellm's bundled files, never the network."""

from __future__ import annotations

from typing import Any

from proxy.config.environment import prepare_environment
from proxy.windows.tokenizers import get_encoding

prepare_environment()
O200K = get_encoding("o200k_base")
CL100K = get_encoding("cl100k_base")


def assert_no_plan_fallbacks(app: Any) -> None:
    """No plan of the proxy ``app`` broke the post-condition (proxy/request/postcondition.py)
    in its life: a fallback to the safe plan is a bug it hid."""
    runtime = getattr(app.state, "runtime", None)
    if runtime is None:
        return  # never started
    fallbacks = {t: s.plan_fallbacks for t, s in runtime.metrics.teams.items() if s.plan_fallbacks}
    assert not fallbacks, f"plans fell back to the safe plan: {fallbacks}"
