"""``GET /v1/models`` through the proxy tells each model's window (#53 item 3): the window the
proxy fits that model's requests to, in the fields clients and gateways read, merged into the
upstream's own list (OpenAI's shape and Anthropic's), lowered by the team's cap, and nothing
added for a model whose window the proxy does not know."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.responses import Response

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.security.conftest import Seen, serving

ANTHROPIC = {"x-api-key": "sk-ant-caller", "anthropic-version": "2023-06-01"}
OPENAI = {"authorization": "Bearer sk-openai-caller"}


def openai_list(seen: Seen) -> Response:
    listed = {"object": "list", "data": [
        {"id": "local-coder", "object": "model", "owned_by": "me", "context_window": 131072},
        {"id": "nobody-knows-7b", "object": "model", "owned_by": "me"},
    ]}  # fmt: skip
    return Response(orjson.dumps(listed), media_type="application/json")


def anthropic_list(seen: Seen) -> Response:
    listed = {"data": [{"type": "model", "id": "claude-local", "display_name": "Local",
                        "max_input_tokens": 200000, "max_tokens": 64000},
                       {"type": "model", "id": "claude-other", "display_name": "Other"}],
              "has_more": False, "first_id": "claude-local", "last_id": "claude-local"}  # fmt: skip
    return Response(orjson.dumps(listed), media_type="application/json")


@pytest.fixture
def listing(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with ExitStack() as stack:
        openai = stack.enter_context(contextmanager(serving)())
        anthropic = stack.enter_context(contextmanager(serving)())
        openai.answer, anthropic.answer = openai_list, anthropic_list
        config = {
            "data_dir": str(tmp_path),
            "upstreams": {
                "openai": {"base_url": f"{openai.url}/v1"},
                "anthropic": {"provider": "anthropic", "base_url": anthropic.url},
            },
            "default_upstream": "openai",
            "models": {
                "local-coder": {"context_window": 32768},
                "claude-local": {"context_window": 24000, "upstream": "anthropic"},
                "configured-only": {"context_window": 16000, "max_output_tokens": 4096},
            },
            "teams": {
                "capped": {"max_context_tokens": 12000},
                "limited": {"models": ["claude-local"]},
            },
        }
        app = create_app(load_settings(None, **config))
        url = stack.enter_context(BackgroundServer(app)).url
        yield {"url": url}


def listed(url: str, headers: dict[str, str]) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=30) as client:
        got = client.get("/v1/models", headers=headers)
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


def test_the_openai_list_tells_the_window_the_proxy_fits_to(listing: dict[str, Any]) -> None:
    models = {m["id"]: m for m in listed(listing["url"], OPENAI)["data"]}
    coder = models["local-coder"]
    # The server's own 131072 is lowered to the configured 32768, which the proxy fits to.
    assert coder["context_window"] == coder["max_input_tokens"] == 32768
    assert coder["owned_by"] == "me"  # the rest as the upstream listed it
    assert models["nobody-knows-7b"] == {"id": "nobody-knows-7b", "object": "model",
                                         "owned_by": "me"}  # fmt: skip
    configured = models["configured-only"]
    assert configured["context_window"] == 16000 and configured["max_tokens"] == 4096


def test_a_teams_cap_is_the_window_its_callers_are_told(listing: dict[str, Any]) -> None:
    team = {**OPENAI, "x-contextwarden-team": "capped"}
    models = {m["id"]: m for m in listed(listing["url"], team)["data"]}
    assert models["local-coder"]["context_window"] == 12000
    assert models["configured-only"]["max_input_tokens"] == 12000


def test_the_anthropic_list_keeps_its_shape_with_the_window(listing: dict[str, Any]) -> None:
    body = listed(listing["url"], ANTHROPIC)
    assert body["has_more"] is False and body["first_id"] == "claude-local"
    model, other = body["data"]
    assert model["max_input_tokens"] == 24000  # 200,000 stated, 24,000 fitted to
    assert model["max_tokens"] == 24000  # no reply is longer than the window
    assert model["display_name"] == "Local"
    assert other["id"] == "claude-other"
    # A team limited to some models is listed those alone, in this shape too.
    team = {**ANTHROPIC, "x-contextwarden-team": "limited"}
    assert [m["id"] for m in listed(listing["url"], team)["data"]] == ["claude-local"]


def test_an_anthropic_client_of_an_openai_compatible_server_gets_anthropics_shape(
    tmp_path: Path,
) -> None:
    """A user's try: Claude Code in front of a vLLM-like server that serves Messages too got
    OpenAI's list (no ``has_more``, ``type`` or ``display_name``) from ``/v1/models``."""
    with ExitStack() as stack:
        server = stack.enter_context(contextmanager(serving)())
        server.answer = openai_list
        apis = ["chat_completions", "responses", "messages"]
        config = {
            "data_dir": str(tmp_path),
            "upstreams": {"local": {"base_url": f"{server.url}/v1", "apis": apis}},
            "models": {"local-coder": {"context_window": 32768}},
        }
        url = stack.enter_context(BackgroundServer(create_app(load_settings(None, **config)))).url
        body = listed(url, ANTHROPIC)
    assert body["has_more"] is False and body["first_id"] == "local-coder"
    coder = body["data"][0]
    assert coder["type"] == "model" and coder["display_name"] == "local-coder"
    assert coder["max_input_tokens"] == 32768 and coder["created_at"].endswith("Z")
