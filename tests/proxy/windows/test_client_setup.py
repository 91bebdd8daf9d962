"""``contextwarden client-setup``: the lines each client reads, from the config or litellm's
table; what it needs said first (the model, a window nothing states)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from proxy.cli import main
from proxy.config.settings import load_settings
from proxy.windows.client_setup import SetupError, lines, setup_for

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


def test_claude_code_is_given_no_auto_compact_window_it_would_read_as_100k() -> None:
    """Both builds read ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` as 100,000 at the least (2.1.332
    says so on stderr): a line saying 32,000 told it nothing. Under 100,000 no window line is
    printed, and a comment says why."""
    setup = setup_for(load_settings(None), URL, "claude-opus-4-8", 32_000)
    printed = lines("claude", setup)
    assert not any("AUTO_COMPACT_WINDOW=" in line for line in printed)
    assert printed[-1].startswith("# Claude Code reads no auto-compact window under 100,000")
    exports = [line for line in printed if not line.startswith("#")]
    assert exports == [f"export ANTHROPIC_BASE_URL={URL}", "export ANTHROPIC_MODEL=claude-opus-4-8"]
    at_least = setup_for(load_settings(None), URL, "claude-opus-4-8", 100_000)
    assert "export CLAUDE_CODE_AUTO_COMPACT_WINDOW=100000" in lines("claude", at_least)


def test_agents_gets_the_snippet_with_tracing_off() -> None:
    setup = setup_for(load_settings(None), URL, "local-model", 16_000)
    code = "\n".join(lines("agents", setup))
    compile(code, "<snippet>", "exec")
    assert f"base_url='{URL}/v1'" in code and "set_tracing_disabled(True)" in code


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


@pytest.mark.parametrize("name", ["a b", "x$(echo PWNED >&2)", 'q"uo\\te', "caf\u00e9/m:1"])
def test_a_model_name_reads_back_as_given(name: str) -> None:
    """Quoted for the shell, escaped for TOML: what each client reads is the name itself."""
    import shlex
    import subprocess

    setup = setup_for(load_settings(None), URL, name, 8000)
    exports = [line for line in lines("claude", setup) if line.startswith("export ANTHROPIC_MODEL")]
    shell = subprocess.run(
        ["sh", "-c", f'{exports[0]}; printf %s "$ANTHROPIC_MODEL"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shell.stdout == name and not shell.stderr
    assert tomllib.loads("\n".join(lines("codex", setup)))["model"] == name
    assert shlex.split(exports[0].removeprefix("export "))[0] == f"ANTHROPIC_MODEL={name}"


def test_an_address_that_would_not_read_back() -> None:
    settings = load_settings(None)
    with pytest.raises(SetupError, match="--url"):
        setup_for(settings, "localhost:9000", "m", 8000)
    setup = setup_for(settings, "http://h:9000/v1/", "m", 8000)
    assert tomllib.loads("\n".join(lines("codex", setup)))["openai_base_url"] == "http://h:9000/v1"
    with pytest.raises(SetupError, match="not a model name"):
        setup_for(settings, URL, "a\nb", 8000)


def test_agents_prints_what_its_page_says(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/openai-agents.md: on the embedded default config, ``--model`` is needed (and a
    window for it); given, the page's set-up statements under a comment naming the model and
    its window."""
    assert main(["client-setup", "agents"]) == 2
    assert capsys.readouterr().err.strip() == (
        "client-setup: name the model the client will use: --model M (none is configured)"
    )
    assert main(["client-setup", "agents", "--model", "my-local-model"]) == 2
    assert "no context window is known for 'my-local-model'" in capsys.readouterr().err
    assert main(["client-setup", "agents", "--model", "gpt-4.1"]) == 0
    printed = capsys.readouterr().out
    first = printed.splitlines()[0]
    assert first.startswith("# openai-agents through the proxy, 'gpt-4.1': window ")
    assert "give each Agent its model" in first
    page = (Path(__file__).parents[3] / "docs" / "openai-agents.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    assert snippet is not None
    assert ast.dump(ast.parse(printed)) == ast.dump(ast.parse(snippet.group(1)))
