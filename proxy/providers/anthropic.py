"""Anthropic's API: Messages, the key in ``x-api-key``, its own model list, its context
editing (Messages' ``context_management``)."""

from __future__ import annotations

from dataclasses import dataclass

from proxy.providers.base import Provider, UpstreamConfig


@dataclass(frozen=True, kw_only=True, slots=True)
class AnthropicApi(Provider):
    def summarizer(self, upstream: UpstreamConfig, model: str) -> tuple[str, str | None]:
        if not upstream.base_url:
            return Provider.summarizer(self, upstream, model)
        # litellm's Anthropic provider appends /v1/messages to its api_base.
        return f"anthropic/{model}", upstream.base_url.rstrip("/").removesuffix("/v1")


PROVIDER = AnthropicApi(
    kind="anthropic",
    apis=("messages",),
    key_header="x-api-key",
    key_prefix="",
    model_list="relayed",
    native_messages=True,
    hosts=("api.anthropic.com",),
    context_api="messages",
)
