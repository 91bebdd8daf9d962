"""Model families: one ``models:`` entry for every name a pattern matches, the names the real
clients invent (Claude Code's ``claude-opus-4-8``, Codex's ``gpt-6.1-sol``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli import main
from proxy.config.settings import Team, load_settings
from proxy.edge.auth import Principal
from proxy.observe.metrics import Metrics
from proxy.windows.families import Families
from proxy.windows.models import build_models

CONFIG = {
    "upstreams": {
        "anthropic": {"provider": "anthropic", "base_url": "http://127.0.0.1:9/v1"},
        "openai": {"base_url": "http://127.0.0.1:9/v1"},
    },
    "default_upstream": "openai",
    "models": {
        "claude-*": {"upstream": "anthropic", "context_window": 200_000},
        "claude-opus-*": {"upstream": "anthropic", "context_window": 500_000},
        "claude-opus-4-8": {"upstream": "anthropic", "context_window": 1_000_000},
        "gpt-6*": {"context_window": 400_000, "tokenizer": "o200k_base"},
    },
}


def test_an_exact_name_wins_then_the_most_specific_pattern() -> None:
    families = Families({"a*": 1, "ab*": 2, "abc": 3, "?b*": 4})
    assert families.find("abc") == ("abc", 3)
    assert families.find("abd") == ("ab*", 2)  # "ab*" and "?b*": two literal characters each
    assert families.find("axe") == ("a*", 1)
    assert families.find("xbz") == ("?b*", 4)
    assert families.find("zzz") is None


def test_a_model_no_table_knows_gets_its_familys_window_and_upstream() -> None:
    models = build_models(load_settings(None, **CONFIG))
    sonnet = models.resolve("claude-sonnet-9")
    assert (sonnet.window, sonnet.route.name) == (200_000, "anthropic")
    assert models.resolve("claude-opus-5").window == 500_000
    assert models.resolve("claude-opus-4-8").window == 1_000_000
    luna = models.resolve("gpt-6.7-luna")
    assert (luna.window, luna.route.name, luna.pricing.exact) == (400_000, "openai", True)


def test_metrics_label_a_family_by_its_pattern() -> None:
    metrics = Metrics(CONFIG["models"])
    assert metrics.model_label("claude-sonnet-9") == "claude-*"
    assert metrics.model_label("claude-opus-4-8") == "claude-opus-4-8"
    assert metrics.model_label("llama") == "other"


def test_a_team_may_be_allowed_a_family() -> None:
    who = Principal(team="t", config=Team(models=["claude-*"]), forward_client_auth=False)
    assert who.allows("claude-opus-4-8")
    assert not who.allows("gpt-6.1-sol")


def test_check_config_shows_what_each_pattern_matched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "claude-opus-*:" in out and "gpt-6*:" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("gpt-6*:"))
    assert "gpt-6.1-sol" in line  # litellm's table knows it; the pattern takes it
