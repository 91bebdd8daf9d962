"""proxy/windows/models.py: resolving a model to its route."""

from __future__ import annotations

import pytest


def test_a_resolved_route_carries_the_key_but_never_shows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from proxy.config.settings import load_settings
    from proxy.edge.runtime import build_models

    monkeypatch.setenv("OPENAI_API_KEY", "sk-route-secret")
    spec = build_models(load_settings()).resolve("gpt-4o")
    assert spec.route.name == "openai" and spec.route.key == "sk-route-secret"
    assert "chat_completions" in spec.route.apis and "responses" in spec.route.apis
    assert "sk-route-secret" not in repr(spec)
