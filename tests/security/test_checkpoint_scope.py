"""In passthrough mode a checkpoint belongs to the credential that paid for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.conftest import first_request_summaries
from tests.e2e.test_checkpoints import over_budget_conversation


def ask(url: str, key: str, extra: dict[str, str] | None = None) -> Any:
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        return client.chat.completions.with_raw_response.create(
            model="demo-model",
            messages=over_budget_conversation(16),  # type: ignore[arg-type]
            max_tokens=64,
            extra_headers=extra or {},
        )


def test_callers_sharing_a_team_do_not_share_checkpoints(tmp_path: Path) -> None:
    app = create_upstream(window=1024)
    with BackgroundServer(app) as demo:
        config = first_request_summaries(
            {
                "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
                "models": {"demo-model": {"context_window": 1024, "tokenizer": "o200k_base"}},
                "data_dir": str(tmp_path),
            }
        )
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            alice = ask(proxy.url, "sk-alice")
            again = ask(proxy.url, "sk-alice")
            bob = ask(proxy.url, "sk-bob")
        # A restarted proxy on the same store keeps Alice's checkpoint hers.
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            restarted = ask(proxy.url, "sk-alice")
    assert alice.headers["x-contextwarden-checkpoint"].startswith("created")
    assert again.headers["x-contextwarden-checkpoint"].startswith("reused")
    assert bob.headers["x-contextwarden-checkpoint"].startswith("created")  # not Alice's
    assert restarted.headers["x-contextwarden-checkpoint"].startswith("reused")
    assert b"sk-alice" not in (tmp_path / "checkpoints.sqlite3").read_bytes()
