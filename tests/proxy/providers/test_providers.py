"""proxy/providers/: each kind's auth, what its config needs, its wire formats and transport,
context_management under ``auto``, which probe window discovery asks it with, and how a
summary is asked of it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette

from proxy.config.catalog import Upstream
from proxy.headers import upstream_headers
from proxy.providers.litellm import key_header
from proxy.providers.ollama import probe as ollama_probe
from proxy.providers.registry import PROVIDERS, SERVERS, context_management, provider_of
from proxy.windows.discovery import asks
from proxy.windows.servers import probe
from tests.clients.metadata import KINDS, Metadata

OPENAI = Upstream(base_url="https://api.openai.com/v1")
ANTHROPIC = Upstream(provider="anthropic", base_url="https://api.anthropic.com/v1")
LITELLM = Upstream(provider="litellm", model="bedrock/anthropic.claude-3-5-sonnet")
LOCAL = Upstream(base_url="http://localhost:11434/v1", discovery="ollama")


def test_each_upstream_is_its_kinds_and_a_local_server_refines_openai() -> None:
    assert provider_of(OPENAI) is PROVIDERS["openai"]
    assert provider_of(ANTHROPIC) is PROVIDERS["anthropic"]
    assert provider_of(LITELLM) is PROVIDERS["litellm"]
    ollama = provider_of(LOCAL)
    assert ollama is SERVERS["ollama"] and ollama.kind == "openai"
    assert ollama.apis == PROVIDERS["openai"].apis and ollama.probe is ollama_probe
    # discovery: names a server of OpenAI-compatible upstreams only; off and auto refine none
    assert provider_of(Upstream(base_url="http://x/v1", discovery="off")) is PROVIDERS["openai"]
    with pytest.raises(ValidationError, match="no local server's endpoints"):
        Upstream(provider="anthropic", base_url="http://x", discovery="vllm")


@pytest.mark.parametrize(
    ("upstream", "sent"),
    [
        (OPENAI, ("authorization", "Bearer sk-1")),
        (ANTHROPIC, ("x-api-key", "sk-1")),
        (LITELLM, ("authorization", "Bearer sk-1")),
        (LOCAL, ("authorization", "Bearer sk-1")),
    ],
)
def test_the_proxys_key_goes_in_the_providers_header(
    upstream: Upstream, sent: tuple[str, str]
) -> None:
    headers = upstream_headers([("authorization", "Bearer caller")], upstream, "sk-1")
    assert headers == [sent]
    assert provider_of(upstream).key_header == sent[0]


def test_no_key_adds_no_header_and_configured_headers_come_last() -> None:
    upstream = Upstream(
        provider="anthropic", base_url="https://api.anthropic.com", headers={"x-team": "a"}
    )
    assert upstream_headers([("accept", "*/*")], upstream, None) == [
        ("accept", "*/*"),
        ("x-team", "a"),
    ]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"provider": "openai"}, "an openai upstream needs base_url"),
        ({"provider": "anthropic"}, "an anthropic upstream needs base_url"),
        (
            {"provider": "litellm"},
            "a litellm upstream needs model (e.g. anthropic/claude-sonnet-4-5)",
        ),
        (
            {"provider": "litellm", "model": "x/y", "apis": ["chat_completions", "responses"]},
            "a litellm upstream serves chat_completions only",
        ),
        (
            {"provider": "anthropic", "base_url": "http://x", "discovery": "ollama"},
            "provider: anthropic has no local server's endpoints (discovery: ollama)",
        ),
    ],
)
def test_what_each_kinds_config_needs(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Upstream.model_validate(config)


def test_an_unquoted_off_is_off() -> None:
    """YAML 1.1 reads ``discovery: off`` as false."""
    assert (
        Upstream.model_validate({"base_url": "http://x/v1", "discovery": False}).discovery == "off"
    )
    assert Upstream(base_url="http://x/v1", discovery="ollama").discovery == "ollama"


def test_what_each_kinds_config_may_leave_out() -> None:
    assert Upstream(provider="litellm", model="x/y", apis=("chat_completions",)).base_url is None
    assert Upstream(base_url="http://x/v1").model is None


def test_the_wire_formats_each_serves_unless_its_config_says() -> None:
    assert OPENAI.served_apis == ("chat_completions", "responses")
    assert LOCAL.served_apis == ("chat_completions", "responses")
    assert ANTHROPIC.served_apis == ("messages",)
    assert LITELLM.served_apis == ("chat_completions",)
    stated = Upstream(base_url="http://x/v1", discovery="vllm", apis=("messages",))
    assert stated.served_apis == ("messages",)


def test_transports_and_what_else_differs() -> None:
    openai, anthropic, litellm = (provider_of(u) for u in (OPENAI, ANTHROPIC, LITELLM))
    assert (openai.transport, anthropic.transport, litellm.transport) == ("http", "http", "litellm")
    assert openai.forwards and anthropic.forwards and not litellm.forwards
    assert (openai.model_list, anthropic.model_list, litellm.model_list) == (
        "merged",
        "relayed",
        "configured",
    )
    assert [p.native_messages for p in (openai, anthropic, litellm)] == [False, True, False]
    assert [p.serves_completions for p in (openai, anthropic, litellm)] == [True, False, False]
    assert [p.own_credentials for p in (openai, anthropic, litellm)] == [False, False, True]
    assert litellm.table_model(LITELLM, "claude") == "bedrock/anthropic.claude-3-5-sonnet"
    assert openai.table_model(OPENAI, "gpt-4o") == "gpt-4o"
    assert [p.telemetry_name(u) for p, u in ((openai, OPENAI), (litellm, LITELLM))] == [
        "openai",
        "bedrock",
    ]
    unprefixed = Upstream(provider="litellm", model="gpt-4o")
    assert provider_of(unprefixed).telemetry_name(unprefixed) == "litellm"


@pytest.mark.parametrize(
    ("base_url", "messages", "responses"),
    [
        ("https://api.anthropic.com", "forward", "serve"),
        ("https://API.Anthropic.com/v1", "forward", "serve"),
        ("https://api.openai.com/v1", "serve", "forward"),
        ("https://team.openai.azure.com/openai", "serve", "forward"),
        ("https://openai.azure.com.evil.example", "serve", "serve"),
        ("http://localhost:8000/v1", "serve", "serve"),
        (None, "serve", "serve"),
    ],
)
def test_context_management_auto_forwards_only_to_the_providers_own_api(
    base_url: str | None, messages: str, responses: str
) -> None:
    """By the host, whichever kind is configured (an OpenAI-compatible upstream at Anthropic's
    host forwards Messages' field too)."""
    for kind in ("openai", "anthropic"):
        upstream = Upstream.model_construct(
            provider=kind, base_url=base_url, context_management="auto"
        )
        assert upstream.context_edits == messages
        assert upstream.responses_context == responses


@pytest.mark.parametrize("mode", ["forward", "strip", "serve"])
def test_context_management_stated_is_kept(mode: Any) -> None:
    for api in ("messages", "responses"):
        assert context_management(OPENAI, mode, api) == mode


def test_discovery_asks_only_the_providers_that_discover() -> None:
    assert provider_of(OPENAI).discovers and provider_of(LOCAL).discovers
    assert not provider_of(ANTHROPIC).discovers and not provider_of(LITELLM).discovers
    assert asks(LOCAL) and asks(Upstream(base_url="http://gpu:8000/v1"))
    assert not asks(OPENAI)  # a hosted API under auto
    assert asks(Upstream(base_url="https://api.openai.com/v1", discovery="vllm"))
    assert not asks(ANTHROPIC) and not asks(LITELLM)
    assert not asks(Upstream(base_url="http://gpu:8000/v1", discovery="off"))


@pytest.mark.parametrize("kind", KINDS)
async def test_each_local_servers_probe_reads_its_own_endpoints(kind: str) -> None:
    meta = Metadata(kind, "m", 12_288)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=Starlette(routes=meta.routes())))

    async def get(method: str, url: str, body: Any) -> Any:
        response = await client.request(method, url, json=body)
        return response.json() if response.status_code == 200 else None

    named = provider_of(Upstream(base_url="http://local.test/v1", discovery=kind))  # type: ignore[arg-type]
    said = await probe(get, "http://local.test/v1", "m", named.probe)
    assert said is not None and said.window == 12_288
    if kind != "vllm":
        assert "/v1/models" not in meta.asked  # its own endpoints only, not auto's list first


def test_how_a_summary_is_asked_of_each() -> None:
    assert provider_of(OPENAI).summarizer(OPENAI, "gpt-4o") == (
        "openai/gpt-4o",
        "https://api.openai.com/v1",
    )
    # litellm's Anthropic provider appends /v1/messages itself
    assert provider_of(ANTHROPIC).summarizer(ANTHROPIC, "claude") == (
        "anthropic/claude",
        "https://api.anthropic.com",
    )
    assert provider_of(LITELLM).summarizer(LITELLM, "c") == (LITELLM.model, None)
    assert key_header("anthropic/claude-sonnet-4-5") == "x-api-key"
    assert key_header("bedrock/anthropic.claude") == "authorization"
