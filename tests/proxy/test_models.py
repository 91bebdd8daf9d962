"""proxy/models.py: the calibration rule (conservative, clamped, scoped per team and model)."""

from __future__ import annotations

import pytest

from proxy.models import HIGH, LOW, MIN_SEEN, SLACK, Calibration


def test_nothing_changes_before_enough_answers() -> None:
    c = Calibration()
    for _ in range(MIN_SEEN - 1):
        assert c.observe("t", "m", 0.8) is None
    assert c.window("t", "m", 1000) == 1000


def test_the_largest_recent_ratio_with_slack_is_used() -> None:
    c = Calibration()
    for ratio in (0.8, 0.9, 0.85):
        c.observe("t", "m", ratio)
    assert c.ratio("t", "m") == pytest.approx(0.9 * SLACK)
    assert c.window("t", "m", 900) == int(900 / (0.9 * SLACK))
    assert c.window("other-team", "m", 900) == 900


def test_wild_answers_are_clamped() -> None:
    c = Calibration()
    for ratio in (0.01, 0.01, 0.01):
        c.observe("t", "m", ratio)
    assert c.ratio("t", "m") == pytest.approx(LOW * SLACK)
    for ratio in (50.0, 50.0, 50.0):
        c.observe("t", "m", ratio)
    assert c.ratio("t", "m") == HIGH


def test_a_restored_observation_counts_until_fresh_ones_come() -> None:
    c = Calibration()
    c.restore("t", "m", 1.25)
    assert c.observed("t", "m") == 1.25
    assert c.ratio("t", "m") == pytest.approx(1.25 * SLACK)


def test_a_resolved_route_carries_the_key_but_never_shows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from proxy.config import load_settings
    from proxy.runtime import build_models

    monkeypatch.setenv("OPENAI_API_KEY", "sk-route-secret")
    spec = build_models(load_settings()).resolve("gpt-4o")
    assert spec.route.name == "openai" and spec.route.key == "sk-route-secret"
    assert "chat_completions" in spec.route.apis and "responses" in spec.route.apis
    assert "sk-route-secret" not in repr(spec)
