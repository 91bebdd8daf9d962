"""The default set-up never turns the operator's key into an open proxy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from proxy.config.settings import load_settings


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.internal"])
def test_passthrough_with_a_held_key_on_the_network_is_refused(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    problem = load_settings(None, host=host).exposure_problem()
    assert problem is not None and "auth: keys" in problem


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.5"])
def test_loopback_is_fine(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    assert load_settings(None, host=host).exposure_problem() is None


def test_no_held_key_or_an_explicit_choice_is_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert load_settings(None, host="0.0.0.0").exposure_problem() is None  # clients bring keys
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    open_ = load_settings(None, host="0.0.0.0", allow_open_proxy=True)
    assert open_.exposure_problem() is None


def test_a_litellm_upstream_counts_as_a_held_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = {"upstreams": {"claude": {"provider": "litellm", "model": "anthropic/claude"}}}
    assert load_settings(None, host="0.0.0.0", **config).exposure_problem() is not None


def test_serve_refuses_to_start_as_an_open_proxy() -> None:
    env = {**os.environ, "OPENAI_API_KEY": "sk-operator"}
    env.pop("CONTEXTWARDEN_ALLOW_OPEN_PROXY", None)
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", "--host", "0.0.0.0", "--port", "1"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert b"refusing to serve on 0.0.0.0" in done.stderr
    assert b"sk-operator" not in done.stderr
