"""Upstreams reached through ``litellm.acompletion`` (Bedrock, Gemini, Anthropic...): chat
only, the model named by the config's ``model:`` string, sent by the litellm transport
(proxy/upstreams/litellm_client.py), with credentials litellm may find on its own."""

from __future__ import annotations

from dataclasses import dataclass

from proxy.providers.base import Provider, UpstreamConfig


@dataclass(frozen=True, kw_only=True, slots=True)
class LitellmRouted(Provider):
    def table_model(self, upstream: UpstreamConfig, name: str) -> str:
        # It serves the model its own ``model:`` string names.
        return upstream.model or name

    def telemetry_name(self, upstream: UpstreamConfig) -> str:
        # The provider its model string names (``bedrock/...``: bedrock).
        prefix, slash, _ = (upstream.model or "").partition("/")
        return prefix if slash and prefix else self.kind

    def summarizer(self, upstream: UpstreamConfig, model: str) -> tuple[str, str | None]:
        if not upstream.model:
            return Provider.summarizer(self, upstream, model)
        return upstream.model, upstream.base_url


def key_header(model: str) -> str:
    """The header litellm sends the key of ``model`` (a litellm model string) in: an
    Anthropic model's as ``x-api-key``, every other as a bearer token."""
    return "x-api-key" if model.startswith("anthropic/") else "authorization"


PROVIDER = LitellmRouted(
    kind="litellm",
    apis=("chat_completions",),
    fixed_apis=True,
    needs_base_url=False,
    model_example="anthropic/claude-sonnet-4-5",
    transport="litellm",
    own_credentials=True,
)
