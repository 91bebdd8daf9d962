"""``contextwarden client-setup``: the lines each client reads, from the config or litellm's
table; what it needs said first (the model, a window nothing states)."""

from __future__ import annotations

import tomllib

import pytest

from proxy.cli import main
from proxy.client_setup import SetupError, lines, setup_for
from proxy.config.settings import load_settings

URL = "http://127.0.0.1:9090"


def test_codex_reads_toml_with_the_configured_window() -> None:
    settings = load_settings(None, models={"qwen3-coder": {"context_window": 32_768}})
    setup = setup_for(settings, URL, None, None)  # the config's one model
    parsed = tomllib.loads("\n".join(lines("codex", setup)))
    assert parsed == {
        "openai_base_url": f"{URL}/v1",
        "model": "qwen3-coder",
        "model_context_window": 32_768,
        "model_auto_compact_token_limit": 26_214,
    }


def test_claude_code_reads_the_auto_compact_window_never_the_pair_that_refuses() -> None:
    settings = load_settings(None)
    setup = setup_for(settings, URL, "claude-sonnet-4-5", None)  # litellm's table
    printed = "\n".join(lines("claude", setup))
    assert f"export ANTHROPIC_BASE_URL={URL}" in printed
    assert f"export CLAUDE_CODE_AUTO_COMPACT_WINDOW={setup.window}" in printed
    assert setup.window >= 200_000 and "litellm" in setup.source
    # Read only beside DISABLE_COMPACT, and that pair refuses its own first request at 32k.
    assert "DISABLE_COMPACT" not in printed and "MAX_CONTEXT_TOKENS" not in printed


def test_agents_gets_the_snippet_with_tracing_off() -> None:
    setup = setup_for(load_settings(None), URL, "local-model", 16_000)
    code = "\n".join(lines("agents", setup))
    compile(code, "<snippet>", "exec")
    assert f'base_url="{URL}/v1"' in code and "set_tracing_disabled(True)" in code


def test_what_must_be_said_first() -> None:
    settings = load_settings(None)
    with pytest.raises(SetupError, match="--model"):
        setup_for(settings, URL, None, None)
    with pytest.raises(SetupError, match="context_window"):
        setup_for(settings, URL, "my-local-model", None)


def test_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["client-setup", "codex", "--model", "m", "--window", "8000", "--url", URL]) == 0
    out = capsys.readouterr().out
    assert "model_context_window = 8000" in out and f'"{URL}/v1"' in out
    assert main(["client-setup", "claude"]) == 2
    assert "name the model" in capsys.readouterr().err
