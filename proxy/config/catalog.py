"""What the proxy serves: upstreams (and the wire formats each serves) and models (windows,
tokenizers, policies, prices). Part of the configuration (``proxy/config/settings.py``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from proxy.providers.base import Api
from proxy.providers.registry import context_management, provider_of
from strategies.cost import Prices


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Upstream(Strict):
    # The kinds of upstream, each a module of proxy/providers/ (its ``discovery:`` kinds too).
    provider: Literal["openai", "anthropic", "litellm"] = "openai"
    base_url: str | None = None
    apis: tuple[Api, ...] | None = Field(
        None, description="the wire formats it serves; default by provider (proxy/providers/)"
    )
    api_key_env: str | None = None
    model: str | None = Field(None, description="litellm model string, for provider: litellm")
    discovery: Literal["auto", "ollama", "llama.cpp", "vllm", "lmstudio", "off"] = Field(
        "auto",
        description="ask the server for a model's window when models: does not state it: "
        "auto tries each kind of server; name one to ask only its endpoints; off never asks",
    )
    responses_compaction: Literal["auto", "upstream", "proxy"] = Field(
        "auto",
        description="a Responses compaction request (Codex's compaction_trigger): upstream "
        "forwards it; proxy answers it with the proxy's own summary; auto forwards the first "
        "and answers from then on when the upstream's answer is no compaction",
    )
    context_management: Literal["auto", "forward", "strip", "serve"] = Field(
        "auto",
        description="a body's context_management (Messages: Anthropic's context editing, "
        "which Claude Code sends on every request; Responses: OpenAI's server-side "
        "compaction): forward it; strip it; or serve it (the proxy applies the edits, or "
        "answers with its own compaction item, and leaves the field out). auto: forward to the "
        "provider's own API (api.anthropic.com; api.openai.com, *.openai.azure.com), serve "
        "elsewhere (strict servers refuse the field)",
    )
    timeout: float = Field(600.0, gt=0)
    connect_timeout: float = Field(10.0, gt=0)
    headers: dict[str, str] = Field(default_factory=dict)
    caller_headers: list[str] = Field(
        default_factory=list,
        description="the caller's account headers (openai-organization, openai-project, "
        "cookie...) that may go upstream beside a key the proxy holds; default none",
    )

    @property
    def header_credentials(self) -> list[str]:
        """The configured headers that carry a credential (Azure's ``api-key``, an
        ``Authorization``, any ``*key*``, ``*token*``, ``*secret*`` or ``*auth*`` header): a key
        the proxy holds as much as one in ``api_key_env``."""
        return [h for h in self.headers if CREDENTIAL_NAME.search(h)]

    @property
    def context_edits(self) -> Literal["forward", "strip", "serve"]:
        """What happens to a Messages body's ``context_management`` (``auto`` resolved)."""
        return context_management(self, self.context_management, "messages")

    @property
    def responses_context(self) -> Literal["forward", "strip", "serve"]:
        """What happens to a Responses body's ``context_management`` (``auto`` resolved)."""
        return context_management(self, self.context_management, "responses")

    @property
    def served_apis(self) -> tuple[Api, ...]:
        return self.apis if self.apis is not None else provider_of(self).apis

    @field_validator("discovery", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        """YAML 1.1 reads an unquoted ``off`` as false: it means ``off``."""
        return "off" if value is False else value

    @model_validator(mode="after")
    def _needs(self) -> Upstream:
        problem = provider_of(self).problem(self)
        if problem:
            raise ValueError(problem)
        return self


CREDENTIAL_NAME = re.compile(r"key|token|secret|auth|cookie|password", re.IGNORECASE)


class PriceOverride(Strict):
    """Dollars per prompt token (litellm's names), over what litellm's table says."""

    input_cost_per_token: float | None = Field(None, ge=0)
    cache_read_input_token_cost: float | None = Field(None, ge=0)
    cache_creation_input_token_cost: float | None = Field(None, ge=0)

    def over(self, table: Prices | None) -> Prices | None:
        base = self.input_cost_per_token
        if base is None:
            if table is None:
                return None
            base = table.input
        read = self.cache_read_input_token_cost
        write = self.cache_creation_input_token_cost
        return Prices(
            base,
            read if read is not None else (table.cache_read if table else None),
            write if write is not None else (table.cache_write if table else None),
        )


class ModelEntry(Strict):
    upstream: str | None = None
    policy: str | None = None
    context_window: int | None = Field(None, gt=0)
    max_output_tokens: int | None = Field(None, gt=0)
    tokenizer: str | None = Field(
        None, description="tiktoken encoding (o200k_base, cl100k_base), 'estimate' or 'bytes'"
    )
    prices: PriceOverride | None = None
