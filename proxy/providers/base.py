"""What every kind of upstream is asked: the ``Provider`` (each kind's module holds one, its
``PROVIDER``), and the part of an upstream's configuration a provider reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from proxy.providers.probing import Claim, Probe

# The wire formats an upstream may serve.
Api = Literal["chat_completions", "responses", "messages"]
# How a request reaches an upstream: HTTP (proxy/upstreams/aiohttp_transport.py), or
# litellm's completion call (proxy/upstreams/litellm_client.py). The runtime holds one
# transport of each name (proxy/upstreams/transports.py).
TransportName = Literal["http", "litellm"]
# What GET /v1/models answers from an upstream's list (proxy/edge/passthrough.py):
# "relayed" as it answers (a team's allowed models, with their windows added); "merged" with
# the configured models; "configured": only the configured models (it has no list to ask).
ModelList = Literal["relayed", "merged", "configured"]
# What happens to a body's ``context_management``.
ContextMode = Literal["forward", "strip", "serve"]


class UpstreamConfig(Protocol):
    """What a provider reads of an upstream's configuration (proxy/config/catalog.py)."""

    @property
    def provider(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def apis(self) -> tuple[Api, ...] | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def discovery(self) -> str: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Provider:
    """One kind of upstream: the one place that knows how it is reached and what it serves."""

    kind: str  # the config's ``provider:`` value
    # A local server's name (the config's ``discovery:`` value), for a refinement of an
    # OpenAI-compatible kind; None for the kind itself.
    server: str | None = None
    apis: tuple[Api, ...]  # what it serves when its config's ``apis:`` does not say
    fixed_apis: bool = False  # whether ``apis:`` may name only those
    needs_base_url: bool = True
    model_example: str | None = None  # set when it needs ``model:`` (the example the error gives)
    key_header: str = "authorization"  # the header the proxy's key goes in
    key_prefix: str = "Bearer "
    transport: TransportName = "http"
    model_list: ModelList = "configured"
    native_messages: bool = False  # its own API is Anthropic's Messages
    serves_completions: bool = False  # the legacy /v1/completions
    # A key of its own even when the config holds none (litellm reads its provider's from
    # the environment): counted as a key the proxy spends.
    own_credentials: bool = False
    # Window discovery (proxy/providers/probing.py): whether it is asked at all; a local
    # server's probe (None: ``auto``, which asks the local servers); under ``auto``, whether
    # the OpenAI-compatible list's cards are that server's (None: they never say), and its
    # place in the order the servers are asked in (lower first).
    discovers: bool = False
    probe: Probe | None = None
    claims: Claim | None = None
    turn: int = 0
    # The hosts of its own API, where a body's ``context_management`` in ``context_api`` is
    # forwarded under ``auto`` (a leading dot: any host under that domain).
    hosts: tuple[str, ...] = ()
    context_api: Api | None = None

    @property
    def forwards(self) -> bool:
        """Whether a request on any accepted path may be forwarded to it as it came."""
        return self.transport == "http"

    def problem(self, upstream: UpstreamConfig) -> str | None:
        """What its configuration lacks or says wrong for this kind, or None."""
        if self.needs_base_url and not upstream.base_url:
            return f"an {self.kind} upstream needs base_url"
        if self.fixed_apis and upstream.apis and set(upstream.apis) != set(self.apis):
            return f"a {self.kind} upstream serves {', '.join(self.apis)} only"
        if self.model_example and not upstream.model:
            return f"a {self.kind} upstream needs model (e.g. {self.model_example})"
        if self.server is None and upstream.discovery not in ("auto", "off"):
            # provider_of gives a local server's provider only to a kind that server refines.
            asked = upstream.discovery
            return f"provider: {self.kind} has no local server's endpoints (discovery: {asked})"
        return None

    def auth(self, key: str) -> tuple[str, str]:
        """The header that carries the proxy's key to it."""
        return self.key_header, self.key_prefix + key

    def owns(self, host: str) -> bool:
        """Whether ``host`` serves its own API."""
        return any(host == h or (h.startswith(".") and host.endswith(h)) for h in self.hosts)

    def table_model(self, upstream: UpstreamConfig, name: str) -> str:
        """The name litellm's table knows the model ``name`` served by ``upstream`` by."""
        return name

    def telemetry_name(self, upstream: UpstreamConfig) -> str:
        """gen_ai.provider.name of its requests."""
        return self.kind

    def summarizer(self, upstream: UpstreamConfig, model: str) -> tuple[str, str | None]:
        """How a summary of ``model``'s requests is asked of it through litellm: litellm's
        model string and api_base."""
        return f"openai/{model}", upstream.base_url
