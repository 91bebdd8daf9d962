from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli import main
from proxy.config.settings import ConfigError, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cw.yaml"
    path.write_text(text)
    return path


def test_example_config_is_valid() -> None:
    settings = load_settings(Path(__file__).parents[3] / "config.example.yaml")
    assert settings.models["gpt-4o"].context_window == 128000
    assert settings.upstreams["claude"].provider == "litellm"


def test_typo_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "upstreams:\n  openai:\n    base_url: http://x\n    api_key_evn: K\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert str(path) in str(err.value)
    assert "upstreams.openai.api_key_evn" in str(err.value)


def test_dangling_references_fail(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "upstreams:\n  a: {base_url: http://x}\ndefault_upstream: a\nmodels:\n  m: {upstream: b}\n",
    )
    with pytest.raises(ConfigError, match=r"models\.m\.upstream 'b'"):
        load_settings(path)


def test_litellm_upstream_needs_a_model(tmp_path: Path) -> None:
    path = write(tmp_path, "upstreams:\n  openai: {provider: litellm}\n")
    with pytest.raises(ConfigError, match="needs model"):
        load_settings(path)


def test_invalid_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_settings(write(tmp_path, "upstreams: [unclosed\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml")


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path,
        "port: 7000\nupstreams:\n  openai: {base_url: http://x}\ntrimming:\n  max_overflow_retries: 1\n",
    )
    monkeypatch.setenv("CONTEXTWARDEN_PORT", "9001")
    monkeypatch.setenv("CONTEXTWARDEN_TRIMMING__MAX_OVERFLOW_RETRIES", "4")
    settings = load_settings(path)
    assert settings.port == 9001
    assert settings.trimming.max_overflow_retries == 4


def test_embedded_default_follows_the_openai_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    settings = load_settings()
    assert settings.upstreams["openai"].base_url == "http://127.0.0.1:1234/v1"
    assert settings.api_key("openai") == "sk-from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert settings.api_key("openai") == "sk-from-env"  # read once, when the config loads
    assert load_settings().api_key("openai") is None


def test_check_config_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "upstreams:\n  openai: {base_url: http://x}\n")
    assert main(["check-config", str(good)]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("portt: 1\nupstreams:\n  openai: {base_url: http://x}\n")
    assert main(["check-config", str(bad)]) == 2
    assert "portt" in capsys.readouterr().err


POLICIES = """
upstreams:
  openai: {base_url: "http://x"}
policies:
  default:
    light_trim: {text_threshold: 2000}
  rag:
    extends: default
    cache_cut_share: 0.5
    rules:
      - id: docs
        match: {role: system, content_regex: "^<doc"}
        tier: rag
        strategy: drop
        inject_into_system: markdown
  strict-rag:
    extends: rag
    light_trim: {keep_recent: 8}
models:
  gpt-4o: {policy: strict-rag}
"""


def test_policies_extend_and_rules_come_after_the_system_prompt_before_the_defaults(
    tmp_path: Path,
) -> None:
    settings = load_settings(write(tmp_path, POLICIES))
    policy = settings.policies["strict-rag"].to_policy()
    assert policy.cache_cut_share == 0.5
    trim = next(p for p in policy.passes if p.name == "light_trim")
    assert (trim.keep_recent, trim.text_threshold) == (8, 2000)  # type: ignore[attr-defined]
    assert [r.id for r in policy.rules] == ["system", "docs", "leading", "current"]
    assert policy.rules[1].inject_into_system == "markdown"
    assert policy.rules[1].tier == 2


def test_every_cross_reference_mistake_comes_in_one_run(tmp_path: Path) -> None:
    text = (
        'upstreams:\n  a: {base_url: "http://x"}\ndefault_upstream: nope\n'
        "models:\n  m: {upstream: zz, policy: qq}\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_settings(write(tmp_path, text))
    for mistake in ("default_upstream 'nope'", "models.m.upstream 'zz'", "models.m.policy 'qq'"):
        assert mistake in str(exc.value)


@pytest.mark.parametrize("port", [0, 65536, 99999])
def test_a_port_out_of_range_is_refused(tmp_path: Path, port: int) -> None:
    with pytest.raises(ConfigError, match="port"):
        load_settings(write(tmp_path, f'port: {port}\nupstreams:\n  a: {{base_url: "http://x"}}\n'))


def test_a_yaml_error_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "upstreams:\n  a: [\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(path)
    assert str(exc.value).count(str(path)) >= 2  # the message's start and the parser's place
    assert "<unicode string>" not in str(exc.value)


def test_the_built_in_default_policy_can_be_extended_without_being_declared(
    tmp_path: Path,
) -> None:
    """The README's rag and agent policies say ``extends: default`` with no ``default:`` of
    their own; that was "no policy named 'default'"."""
    text = 'upstreams:\n  openai: {base_url: "http://x"}\npolicies:\n  rag:\n    extends: default\n'
    settings = load_settings(write(tmp_path, text + "    cache_cut_share: 0.5\n"))
    assert settings.policies["rag"].cache_cut_share == 0.5
    assert settings.policies["rag"].summarize == settings.policies["default"].summarize


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ("policies:\n  a: {extends: b}\n", "no policy named 'b'"),
        ("policies:\n  a: {extends: b}\n  b: {extends: a}\n", "extends cycle"),
        (
            "policies:\n  default: {history: {strategy: truncate_oldest, options: {keep_pairz: true}}}\n",
            "keep_pairz",
        ),
        ("policies:\n  default: {history: {strategy: nope}}\n", "unknown strategy"),
        ("policies:\n  default: {pipeline: [light_trim, squash]}\n", "pipeline"),
        (
            "policies:\n  default: {rules: [{id: r, match: {content_regex: '('}}]}\n",
            "invalid regex",
        ),
        ("default_policy: missing\n", "default_policy 'missing'"),
        ("models:\n  m: {policy: missing}\n", "models.m.policy 'missing'"),
    ],
)
def test_policy_mistakes_fail_at_load(tmp_path: Path, snippet: str, message: str) -> None:
    path = write(tmp_path, "upstreams:\n  openai: {base_url: 'http://x'}\n" + snippet)
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert message in str(err.value)


def test_a_single_upstream_is_the_default_whatever_its_name() -> None:
    settings = load_settings(None, upstreams={"local": {"base_url": "http://localhost:8000/v1"}})
    assert settings.default_upstream == "local"


def test_several_upstreams_without_a_default_name_them() -> None:
    with pytest.raises(ConfigError, match="name one of: a, b"):
        load_settings(
            None, upstreams={"b": {"base_url": "http://b"}, "a": {"base_url": "http://a"}}
        )


def test_field_errors_and_cross_reference_errors_come_in_one_run() -> None:
    """pydantic stops before the cross-references when a field is wrong: they are checked on
    the file itself, so a user fixing a config sees every mistake at once."""
    with pytest.raises(ConfigError) as err:
        load_settings(
            None,
            port=99999,
            models={"gpt-4o": {"policy": "nope", "context_window": -5}},
            teams={"default": {"allowed_policies": ["missing"]}},
            trimming={"estimate_ratio": 0.5},
        )
    text = str(err.value)
    for expected in (
        "port:",
        "models.gpt-4o.context_window:",
        "trimming.estimate_ratio:",
        "models.gpt-4o.policy 'nope' is not in policies",
        "teams.default: policy 'missing' is not in policies",
    ):
        assert expected in text, text


def test_the_removed_upstream_client_setting_says_it_was_removed(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(
        "upstreams: {a: {base_url: 'http://127.0.0.1:9/v1'}}\nupstream_client: aiohttp\n"
    )
    with pytest.raises(ConfigError, match="upstream_client was removed: aiohttp is the one"):
        load_settings(path)
