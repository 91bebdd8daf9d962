"""Shared fixtures: tiktoken from litellm's bundled files, never the network."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from proxy.config.environment import prepare_environment
from proxy.windows.tokenizers import get_encoding

prepare_environment()
O200K = get_encoding("o200k_base")
CL100K = get_encoding("cl100k_base")


def assert_no_plan_fallbacks(app: Any) -> None:
    """No plan of the proxy ``app`` broke the post-condition
    (proxy/request/planning/postcondition.py) in its life: a fallback to the safe plan is a bug it hid."""
    runtime = getattr(app.state, "runtime", None)
    if runtime is None:
        return  # never started
    fallbacks = {t: s.plan_fallbacks for t, s in runtime.metrics.teams.items() if s.plan_fallbacks}
    assert not fallbacks, f"plans fell back to the safe plan: {fallbacks}"


@pytest.fixture(autouse=True)
def collect_what_the_test_left() -> Iterator[None]:
    """Collect garbage as each test ends, so a socket or client it left open warns (and fails,
    ``filterwarnings = error``) in that test's teardown, naming it, instead of in whichever
    later test the collector happens to run in (CI once failed a lock-file test for a client
    another test never closed)."""
    yield
    gc.collect()
