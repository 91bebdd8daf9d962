"""proxy/windows/models.py: resolving a model to its route."""

from __future__ import annotations

import pytest


def test_a_resolved_route_carries_the_key_but_never_shows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from proxy.config.settings import load_settings
    from proxy.windows.models import build_models

    monkeypatch.setenv("OPENAI_API_KEY", "sk-route-secret")
    spec = build_models(load_settings()).resolve("gpt-4o")
    assert spec.route.name == "openai" and spec.route.key == "sk-route-secret"
    assert "chat_completions" in spec.route.apis and "responses" in spec.route.apis
    assert "sk-route-secret" not in repr(spec)


def test_the_window_answer_walks_from_the_config_to_the_teams_cap() -> None:
    """Configured (in the upstream's units), lowered by what an overflow taught, converted by
    the calibration, capped by the team: each step says itself, for this team only."""
    from proxy.config.settings import load_settings
    from proxy.windows.calibration import Fit
    from proxy.windows.models import build_models

    models = build_models(
        load_settings(None, models={"claude-x": {"context_window": 10000, "tokenizer": "estimate"}})
    )
    spec = models.resolve("claude-x")
    assert models.window_for(spec, "a").why == ("10000: configured under models: 'claude-x'",)
    models.learned.learn("a", "claude-x", 9000, evidence="stated 9000")
    models.calibration.restore("a", "claude-x", Fit(per_token=1.25, hidden=1.25))
    answer = models.window_for(spec, "a", cap=5000)
    assert (answer.tokens, answer.upstream_tokens) == (5000, 9000)
    assert answer.why[1] == "9000: learned from the upstream's overflow error (stated 9000)"
    assert answer.why[2].startswith("7200 in the proxy's count") and "1.250" in answer.why[2]
    assert answer.why[3] == "5000: the team's max_context_tokens"
    other = models.window_for(spec, "b", cap=5000)
    assert (other.tokens, other.upstream_tokens) == (5000, 10000)
    assert models.window(spec, "b") == 10000
