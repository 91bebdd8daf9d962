"""What ``serve`` and ``check-config`` check and say before the proxy listens: the embedded
default (OpenAI and Anthropic), the options validated as the file's keys are, an upstream at the
proxy's own address refused, the unset key variables named with what they mean, and ``preview
--team``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.cli import banner, main
from proxy.config.settings import load_settings
from proxy.config.startup import key_notes, points_at_proxy, self_loop_problem


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def write(tmp_path: Path, text: str, name: str = "cw.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# The embedded default ------------------------------------------------------------------------


def test_the_embedded_default_serves_openai_and_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings()
    assert settings.upstreams["openai"].base_url == "https://api.openai.com/v1"
    assert settings.upstreams["openai"].served_apis == ("chat_completions", "responses")
    anthropic = settings.upstreams["anthropic"]
    assert (anthropic.provider, anthropic.base_url) == ("anthropic", "https://api.anthropic.com/v1")
    assert anthropic.api_key_env is None  # each caller's own key goes through
    assert settings.models["claude-*"].upstream == "anthropic"
    assert settings.default_upstream == "openai"
    # ANTHROPIC_BASE_URL means what it means to Anthropic's SDK and Claude Code: no /v1.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.internal:9000/anthropic/")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gateway.internal:9000/openai/v1")
    settings = load_settings()
    assert settings.upstreams["anthropic"].base_url == "http://gateway.internal:9000/anthropic/v1"
    assert settings.upstreams["openai"].base_url == "http://gateway.internal:9000/openai/v1"


def test_a_file_without_upstreams_is_served_with_the_default_ones(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "policies:\n  default: {summarize: false}\n"))
    assert set(settings.upstreams) == {"openai", "anthropic"}
    assert settings.models["claude-*"].upstream == "anthropic"
    assert settings.upstreams_defaulted
    # Its own claude-* wins; its own upstreams mean none are added.
    own = write(tmp_path, 'models:\n  "claude-*": {context_window: 100000}\n', "own.yaml")
    assert load_settings(own).models["claude-*"].context_window == 100000
    listed = write(tmp_path, "upstreams:\n  local: {base_url: 'http://127.0.0.1:9/v1'}\n", "l.yaml")
    settings = load_settings(listed)
    assert set(settings.upstreams) == {"local"} and not settings.models
    assert not settings.upstreams_defaulted


def test_check_config_says_the_upstreams_are_the_default_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", str(write(tmp_path, "log_content: false\n"))]) == 0
    out = capsys.readouterr().out
    assert "2 upstreams" in out and "embedded default's" in out


# Options validated as the file's keys ---------------------------------------------------------


def test_serve_port_99999_exits_2_with_the_files_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", str(write(tmp_path, "port: 99999\n"))]) == 2
    from_file = capsys.readouterr().err.splitlines()
    assert main(["serve", "--port", "99999"]) == 2
    from_flag = capsys.readouterr().err.splitlines()
    assert from_flag[1:] == from_file[1:] == ["  port: Input should be less than or equal to 65535"]
    assert "--port 99999" in from_flag[0]
    assert main(["serve", "--port", "0"]) == 2
    assert "port: Input should be greater than or equal to 1" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["http://0.0.0.0", "127.0.0.1:8080", "a host", "-h"])
def test_a_host_that_is_no_address_is_refused_from_the_file_and_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    assert main(["serve", f"--host={host}"]) == 2
    from_flag = capsys.readouterr().err.splitlines()[1:]
    assert main(["check-config", str(write(tmp_path, json.dumps({"host": host})))]) == 2
    assert capsys.readouterr().err.splitlines()[1:] == from_flag
    assert "is not an address to listen on" in from_flag[0]


def test_the_options_beat_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWARDEN_PORT", "9001")
    assert load_settings().port == 9001
    assert load_settings(flags={"port": 9002, "host": None}).port == 9002


@pytest.mark.parametrize("option", [["--turns", "0"], ["--window", "-5"], ["--window", "x"]])
def test_the_demo_takes_positive_whole_numbers(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", *option])
    assert exited.value.code == 2
    assert option[0] in capsys.readouterr().err


# An upstream at the proxy's own address ---------------------------------------------------------


def test_an_upstream_at_the_proxys_own_address_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Clients and the proxy in one shell read the same variables: the proxy would send every
    request back to itself."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    assert main(["serve"]) == 2
    said = capsys.readouterr().err
    assert "upstream 'openai' (http://127.0.0.1:8080/v1, from OPENAI_BASE_URL)" in said
    assert "this proxy's own address" in said and "env -u OPENAI_BASE_URL" in said
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:8080")
    assert main(["serve"]) == 2
    assert "from ANTHROPIC_BASE_URL" in capsys.readouterr().err
    # Another port is another server: no refusal.
    assert self_loop_problem(load_settings(flags={"port": 8081})) is None


def test_a_configured_upstream_at_the_proxys_address_is_refused_by_check_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "port: 9123\nupstreams:\n  local: {base_url: 'http://[::1]:9123/v1'}\n")
    assert main(["check-config", str(path)]) == 2
    said = capsys.readouterr().err
    assert "serve would refuse it" in said and "upstreams.local.base_url" in said


@pytest.mark.parametrize(
    ("url", "host", "port", "loops"),
    [
        ("http://127.0.0.1:8080/v1", "127.0.0.1", 8080, True),
        ("http://localhost:8080", "127.0.0.1", 8080, True),
        ("http://127.0.0.2:8080", "localhost", 8080, True),
        ("http://localhost:8080/v1", "0.0.0.0", 8080, True),
        ("http://[::1]:8080/v1", "::", 8080, True),
        ("http://localhost/v1", "127.0.0.1", 80, True),
        ("http://127.0.0.1:8081/v1", "127.0.0.1", 8080, False),
        ("https://127.0.0.1:8080/v1", "127.0.0.1", 8080, False),  # the proxy speaks plain HTTP
        ("https://api.openai.com/v1", "127.0.0.1", 443, False),
        ("http://localhost:8080/v1", "192.0.2.10", 8080, False),  # listening elsewhere
    ],
)
def test_what_points_at_the_proxy(url: str, host: str, port: int, loops: bool) -> None:
    assert points_at_proxy(url, host, port) is loops


# Key variables that are unset --------------------------------------------------------------------

KEYS = """
auth: keys
admin_key_env: CW_ADMIN
metrics_key_env: CW_METRICS
upstreams:
  openai: {base_url: "https://api.openai.com/v1", api_key_env: OPENAI_API_KEY}
  anthropic: {provider: anthropic, base_url: "https://api.anthropic.com/v1"}
teams:
  search: {key_envs: [SEARCH_KEY, SEARCH_KEY_2]}
  chat: {key_envs: [CHAT_KEY]}
"""


def test_serve_names_every_unset_key_variable_and_what_it_means(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CW_ADMIN", "CW_METRICS", "SEARCH_KEY", "SEARCH_KEY_2", "CHAT_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SEARCH_KEY", "")  # empty is unset
    path = write(tmp_path, KEYS)
    notes = key_notes(load_settings(path))
    assert notes == [
        "OPENAI_API_KEY is not set: in keys mode no caller's key goes upstream, so upstream "
        "'openai' gets no key and will refuse what it is sent",
        "upstream 'anthropic' names no api_key_env: in keys mode no caller's key goes upstream, "
        "so upstream 'anthropic' gets no key and will refuse what it is sent",
        "SEARCH_KEY is not set: team 'search' has no key: nobody can call as it",
        "SEARCH_KEY_2 is not set: team 'search' has no key: nobody can call as it",
        "CHAT_KEY is not set: team 'chat' has no key: nobody can call as it",
        "no team key is set: every request will be refused with 401",
        "CW_ADMIN is not set: the admin API (/admin/*) answers 403 until it is",
        "CW_METRICS is not set: /metrics takes no key: it is closed",
    ]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    monkeypatch.setenv("SEARCH_KEY_2", "cw-s2")
    monkeypatch.setenv("CHAT_KEY", "cw-c")
    monkeypatch.setenv("CW_ADMIN", "cw-admin")
    settings = load_settings(path)
    assert key_notes(settings) == [
        "upstream 'anthropic' names no api_key_env: in keys mode no caller's key goes upstream, "
        "so upstream 'anthropic' gets no key and will refuse what it is sent",
        "SEARCH_KEY is not set: team 'search' has one key fewer (1 left)",
        "CW_METRICS is not set: /metrics takes the admin key only",
    ]
    shown = banner(settings, str(path))
    assert all(f"  {note}" in shown.splitlines() for note in key_notes(settings))


def test_in_passthrough_an_unset_upstream_key_means_the_callers_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert key_notes(load_settings()) == [
        "OPENAI_API_KEY is not set: upstream 'openai' gets each caller's own key (passthrough)"
    ]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    assert key_notes(load_settings()) == []


def test_check_config_names_them_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAT_KEY", raising=False)
    assert main(["check-config", str(write(tmp_path, KEYS))]) == 0
    assert "CHAT_KEY is not set: team 'chat' has no key" in capsys.readouterr().out


# The banner ------------------------------------------------------------------------------------


def test_the_banner_says_whether_the_admin_api_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off by default (a user set CW_ADMIN_KEY, as config.example.yaml names it, and got 403
    from the endpoints the banner pointed at): the banner says so, and how to turn it on."""
    off = banner(load_settings(), None)
    assert "admin API (/admin/stats, /admin/learned-windows " in off and ": off until" in off
    assert "admin_key_env: CW_ADMIN_KEY" in off
    named = load_settings(None, admin_key_env="CW_ADMIN_KEY")
    monkeypatch.delenv("CW_ADMIN_KEY", raising=False)
    unset = banner(named, None)
    assert "admin API (/admin/stats, /admin/learned-windows " in unset
    assert "off until $CW_ADMIN_KEY is set" in unset
    monkeypatch.setenv("CW_ADMIN_KEY", "cw-admin")
    assert "admin API (key in $CW_ADMIN_KEY): /admin/stats" in banner(named, None)


def test_the_banner_names_the_ways_out_for_a_model_in_no_table() -> None:
    shown = banner(load_settings(), None)
    assert (
        "upstreams: openai (https://api.openai.com/v1), anthropic (https://api.anthropic.com/v1)"
        in shown
    )
    assert "family claude-*: via anthropic, each name's window from litellm's table" in shown
    assert "a model in no table and not configured" in shown
    for way in (
        "configure its window: models:",
        "let its server tell:",
        "let its errors teach it:",
    ):
        assert way in shown


@pytest.mark.parametrize(
    ("host", "first_line"),
    [
        (
            "127.0.0.1",
            "contextwarden on http://127.0.0.1:8080 (point clients at "
            "http://127.0.0.1:8080/v1; Anthropic clients at http://127.0.0.1:8080)",
        ),
        # A client cannot connect to "every address": it is told the loopback one.
        (
            "0.0.0.0",
            "contextwarden on all addresses, port 8080 (point clients at "
            "http://127.0.0.1:8080/v1; Anthropic clients at http://127.0.0.1:8080)",
        ),
        (
            "::",
            "contextwarden on all addresses, port 8080 (point clients at "
            "http://[::1]:8080/v1; Anthropic clients at http://[::1]:8080)",
        ),
        (
            "::1",
            "contextwarden on http://[::1]:8080 (point clients at "
            "http://[::1]:8080/v1; Anthropic clients at http://[::1]:8080)",
        ),
    ],
)
def test_the_banner_gives_an_address_a_client_can_use(host: str, first_line: str) -> None:
    shown = banner(load_settings(flags={"host": host, "port": 8080}), None)
    assert shown.splitlines()[0] == first_line


# preview --team --------------------------------------------------------------------------------

TEAMS = """
upstreams:
  openai: {base_url: "http://127.0.0.1:9/v1"}
models:
  gpt-4.1: {context_window: 100000}
teams:
  search: {models: [gpt-4.1], max_context_tokens: 2000}
"""


def test_preview_plans_as_the_team(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, TEAMS + f"data_dir: {tmp_path / 'data'}\n")
    body = tmp_path / "body.json"
    messages = [{"role": "user", "content": f"turn {k} " + "word " * 300} for k in range(20)]
    body.write_text(json.dumps({"model": "gpt-4.1", "messages": messages}))
    assert main(["preview", str(body), "--config", str(config), "--json"]) == 0
    default = json.loads(capsys.readouterr().out)["report"]
    assert (default["team"], default["window"], default["actions"]) == ("default", 100000, ["none"])
    assert main(["preview", str(body), "--config", str(config), "--team", "search", "--json"]) == 0
    search = json.loads(capsys.readouterr().out)["report"]
    assert (search["team"], search["window"]) == ("search", 2000)
    assert search["tokens_after"] <= search["budget"] < 2000 and search["actions"] != ["none"]
    # A model the team may not use, and a team the config does not have.
    assert (
        main(["preview", str(body), "--config", str(config), "--team", "search", "--model", "o3"])
        == 1
    )
    assert "may not use model 'o3'" in capsys.readouterr().err
    assert main(["preview", str(body), "--config", str(config), "--team", "nobody"]) == 2
    said = capsys.readouterr().err
    assert "--team 'nobody'" in said and "(its teams: default, search)" in said


def test_preview_takes_a_plain_claude_body_as_the_messages_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the quick start's config, a Claude body of plain user turns reads as chat and as
    Messages alike; its model's upstream serves only Messages, so that is what it is taken as.
    A body that is chat indeed (a system message) is still told its upstream's formats."""
    monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path / "data"))
    body = tmp_path / "body.json"
    messages = [{"role": "user", "content": "hello " * 50}]
    body.write_text(
        json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": messages})
    )
    assert main(["preview", str(body), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["report"]["upstream"], shown["report"]["format"]) == ("anthropic", "anthropic")
    chat = [{"role": "system", "content": "be brief"}, *messages]
    body.write_text(json.dumps({"model": "claude-sonnet-4-5", "messages": chat}))
    assert main(["preview", str(body)]) == 1
    assert "which serves messages, not chat_completions" in capsys.readouterr().err
    # A GPT body of the same shape stays chat.
    body.write_text(json.dumps({"model": "gpt-4.1", "max_tokens": 512, "messages": messages}))
    assert main(["preview", str(body), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["report"]["format"] == "chat"


def test_the_banner_says_the_window_an_agent_cli_needs_for_a_small_configured_model() -> None:
    """#54 item 2: a configured model whose window leaves Claude Code's or Codex's frame less
    than a step's room is named with the window each client needs."""
    models = {"qwen-small": {"context_window": 16_000}, "qwen-large": {"context_window": 65_536}}
    shown = banner(load_settings(None, models=models), None)
    assert (
        "Claude Code's instructions and tools take about 18,600 tokens: with qwen-small it "
        "needs a window of at least 26,600" in shown
    )
    assert "Codex's instructions and tools take about 11,700 tokens: with qwen-small" in shown
    assert "with qwen-large" not in shown
