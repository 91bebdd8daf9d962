"""``contextwarden client-setup claude|codex|agents``: the lines each client reads to know the
window the proxy fits its model to, so that its own compaction runs before the proxy has to
trim (a 32k local model looks like 200k to Claude Code, and like 272,000 to Codex).

What each client reads was found in its own code, at the pinned and the current release:

- **Claude Code** (2.1.197, 2.1.332): ``CLAUDE_CODE_AUTO_COMPACT_WINDOW``, the window its
  auto-compaction is measured against, read as 100,000 at the least (``Math.max(1e5, ...)`` in
  both builds; 2.1.332 says so on stderr): under that it is not printed, and Claude Code,
  believing its model's window larger, never compacts on its own; the proxy fits every
  request (at 32k its 18,600-token frame would be over its compaction threshold anyway). Its
  ``/v1/models`` capability fetch is compiled off in both builds, and
  ``CLAUDE_CODE_MAX_CONTEXT_TOKENS`` is read for a ``claude-*`` model only beside
  ``DISABLE_COMPACT``, a pair that makes it refuse its own first request at 32k: neither is
  printed.
- **Codex** (0.169.0, 0.171.0): ``model_context_window`` and
  ``model_auto_compact_token_limit`` in ``~/.codex/config.toml`` (it compacts past the limit;
  unset, at nine tenths of the window, and an unknown model's window is 272,000).
- **openai-agents**: no window setting; the proxy fits every request, and the snippet turns
  the SDK's tracing off (it would send prompts to OpenAI around the proxy).

The window is the config's (``models``, families), else litellm's table's, or ``--window``;
a window learned at run time (``/admin/learned-windows``) is not known to this command.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from proxy.config.settings import Settings
from proxy.windows.models import build_models

CLIENTS = ("claude", "codex", "agents")
# Codex compacts past this share of the window, measured by the usage the upstream reports.
# Through a proxy that trims, that usage stays under the budget the proxy fits to, so Codex
# seldom reaches it (40 steps at 32k by HTTPS: no compaction, the proxy trimmed 35 of 41
# requests; over Codex's WebSocket: 2 compactions, 21 of 43 trimmed, the task finished);
# lower, Codex compacts over and over, and a model that cannot read its own compaction starts
# its task again: measured, not guessed (tests/clients/test_codex.py).
CODEX_COMPACT_SHARE = 0.8
# Claude Code reads CLAUDE_CODE_AUTO_COMPACT_WINDOW as at least this (both builds).
CLAUDE_LEAST_WINDOW = 100_000


class SetupError(ValueError):
    """What the user must say or configure first, in a sentence."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Setup:
    model: str
    window: int
    source: str  # where the window comes from, in words
    url: str  # the proxy's address as a client on this machine reaches it


def setup_for(settings: Settings, url: str, model: str | None, window: int | None) -> Setup:
    """The model, its window and where it comes from; ``SetupError`` when either is unknown,
    or when the address or the name would not read back as given."""
    if not url.startswith(("http://", "https://")):
        raise SetupError(f"--url {url!r}: the proxy's address, such as http://127.0.0.1:8080")
    url = url.rstrip("/").removesuffix("/v1")  # each client's line adds what it needs
    if model is not None and (not model.strip() or any(c in model for c in "\r\n\0")):
        raise SetupError(f"--model {model!r} is not a model name")
    if model is None:
        named = [name for name in settings.models if "*" not in name]
        if len(named) != 1:
            listed = ", ".join(sorted(named)) or "none is configured"
            raise SetupError(f"name the model the client will use: --model M ({listed})")
        model = named[0]
    if window is not None:
        return Setup(model=model, window=window, source="--window", url=url)
    spec = build_models(settings).resolve(model)
    if not spec.window:
        raise SetupError(
            f"no context window is known for {model!r}: configure it (models: {{{model!r}: "
            "{context_window: N}}) or pass --window N"
        )
    return Setup(
        model=model, window=spec.window, source=spec.window_source or "the config", url=url
    )


def lines(client: str, setup: Setup) -> list[str]:
    """What ``client`` reads, as it reads it: shell lines, TOML or Python."""
    said = f"{setup.model!r}: window {setup.window:,} ({setup.source})"
    if client == "claude":
        head = [
            f"# Claude Code through the proxy, {said}: before `claude`, in its shell",
            f"export ANTHROPIC_BASE_URL={shlex.quote(setup.url)}",
            f"export ANTHROPIC_MODEL={shlex.quote(setup.model)}",
        ]
        if setup.window >= CLAUDE_LEAST_WINDOW:
            return [*head, f"export CLAUDE_CODE_AUTO_COMPACT_WINDOW={setup.window}"]
        return [
            *head,
            f"# Claude Code reads no auto-compact window under {CLAUDE_LEAST_WINDOW:,} (it takes "
            f"{CLAUDE_LEAST_WINDOW:,}): at {setup.window:,} it never compacts on its own, and "
            "the proxy fits every request",
        ]
    if client == "codex":
        limit = int(setup.window * CODEX_COMPACT_SHARE)
        return [  # TOML basic strings take JSON's escapes
            f"# Codex through the proxy, {said}: at the top of ~/.codex/config.toml",
            f"openai_base_url = {json.dumps(setup.url + '/v1')}",
            f"model = {json.dumps(setup.model)}",
            f"model_context_window = {setup.window}",
            f"model_auto_compact_token_limit = {limit}",
        ]
    if client == "agents":
        return [
            f"# openai-agents through the proxy, {said}: it has no window setting, the proxy "
            "fits each request; give each Agent its model",
            "import agents, openai",
            "",
            f"agents.set_default_openai_client(openai.AsyncOpenAI(base_url={setup.url + '/v1'!r}))",
            "agents.set_tracing_disabled(True)  # else the SDK posts its traces to OpenAI itself",
        ]
    raise SetupError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")
