"""In passthrough mode the summarizer spends the caller's own credential, whichever header the
client put it in (Claude Code sends x-api-key, not Authorization)."""

from __future__ import annotations

import orjson
import pytest
from starlette.datastructures import Headers

from proxy.config.settings import load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.formats.anthropic import ANTHROPIC
from proxy.summaries.llm import target_for
from proxy.windows.models import build_models

BODY = orjson.dumps(
    {"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
)


@pytest.mark.parametrize(
    "header",
    [
        ("x-api-key", "sk-ant-caller"),
        ("authorization", "Bearer sk-ant-caller"),
        ("api-key", "sk-ant-caller"),
    ],
)
def test_the_summarizer_gets_the_callers_key_from_any_header(header: tuple[str, str]) -> None:
    settings = load_settings(
        None,
        upstreams={"ant": {"provider": "anthropic", "base_url": "http://127.0.0.1:9/v1"}},
        models={"claude-x": {"context_window": 8000}},
    )
    who = Principal(team="default", config=settings.teams["default"], forward_client_auth=True)
    req = build_request(
        BODY, Headers(dict([header])), settings, build_models(settings), who, ANTHROPIC
    )
    target = target_for(settings, req)
    assert target.api_key == "sk-ant-caller"
    assert target.model == "anthropic/claude-x"


def test_the_summarizers_key_is_kept_out_of_its_repr() -> None:
    from proxy.summaries.llm import Target

    assert "sk-secret" not in repr(Target("openai/m", "http://x", "sk-secret"))
