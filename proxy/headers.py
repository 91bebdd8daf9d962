"""Every header the proxy reads, writes or forwards, by name, in one place.

Responses: the ``x-contextwarden-*`` headers that say what the proxy did (``cw_headers``).

Requests: which of the client's headers may go upstream. In ``keys`` mode the client is a team,
not the provider account's owner, so only an allowlist goes (content negotiation, API versions,
SDK telemetry, tracing); credentials, cookies and anything unknown stay here. In ``passthrough``
mode the client's own key goes upstream, so everything but hop-by-hop headers and the proxy's
own goes along; but where the proxy spends a key of its own on the upstream, the client's
credentials and its account headers (organisation, project, cookies: ``ACCOUNT``) stay here
unless the upstream's ``caller_headers`` lists them. In both, the upstream's configured
``headers:`` replace the client's headers of the same name, so a client cannot pick the
operator's organisation or project.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from proxy.errors import BadRequest, ContextTooLarge
from proxy.providers.registry import provider_of
from strategies.budget import Budget

if TYPE_CHECKING:
    from proxy.config.catalog import Upstream

TEAM = "x-contextwarden-team"
POLICY = "x-contextwarden-policy"
SESSION_MEMORY = "x-contextwarden-session-memory"
PIN_LAST = "x-contextwarden-pin-last"  # 1: pin the newest user message, in this conversation
# On an answer whose usage shows the upstream read less of the prompt than it was sent (it
# truncated silently): "<tokens it read> of <tokens sent>", in its units.
UPSTREAM_TRUNCATED = "x-contextwarden-upstream-truncated"
# The proxy's own request headers are for the proxy, not the upstream.
OWN_REQUEST_HEADERS = frozenset({TEAM, POLICY, SESSION_MEMORY, PIN_LAST})

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Never forwarded upstream: the client library sets Host and Content-Length for the body it sends.
REQUEST_DROP = HOP_BY_HOP | {"host", "content-length"}
CREDENTIALS = frozenset({"authorization", "api-key", "x-api-key"})
# Which account a call is billed to or made as, beside the key: never the caller's choice when
# the key is the proxy's (Codex's ChatGPT sign-in sends chatgpt-account-id).
ACCOUNT = frozenset({"openai-organization", "openai-project", "cookie", "chatgpt-account-id"})

# keys mode: what a team's client may say to the operator's upstream account.
KEYS_MODE_ALLOWED = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "content-type",
        "content-encoding",
        "user-agent",
        "openai-beta",
        "anthropic-version",
        "anthropic-beta",
        "idempotency-key",
        "x-request-id",
        "traceparent",
        "tracestate",
    }
)
KEYS_MODE_PREFIXES = ("x-stainless-",)  # the official SDKs' platform and retry telemetry


def upstream_headers(
    incoming: Iterable[tuple[str, str]],
    upstream: Upstream,
    api_key: str | None,
    forward_client_auth: bool = True,
) -> list[tuple[str, str]]:
    """The client's headers for the upstream, then the proxy's key the way its provider takes
    it (proxy/providers/: Anthropic's API ``x-api-key``, others a bearer token), then
    configured headers.

    The client's credentials go along only in passthrough mode (``forward_client_auth``, which
    the caller sets only for the upstream the client addressed) and when the proxy holds no key
    for this upstream; with the proxy's key, the client's account headers stay too, but for
    those the upstream's ``caller_headers`` lists."""
    configured = upstream.headers
    incoming = list(incoming)
    allowed = {h.lower() for h in upstream.caller_headers}
    drop = REQUEST_DROP | connection_tokens(incoming) | OWN_REQUEST_HEADERS
    drop |= {k.lower() for k in configured}
    own_key = bool(api_key or upstream.header_credentials)
    if own_key or not forward_client_auth:
        drop |= CREDENTIALS
    if own_key:
        drop |= ACCOUNT - allowed
    if forward_client_auth:
        out = [(k, v) for k, v in incoming if k.lower() not in drop]
    else:
        out = [
            (k, v)
            for k, v in incoming
            if (_team_may_send(k.lower()) or k.lower() in allowed) and k.lower() not in drop
        ]
    if api_key:
        out.append(provider_of(upstream).auth(api_key))
    out.extend(configured.items())
    return out


def _team_may_send(name: str) -> bool:
    return name in KEYS_MODE_ALLOWED or name.startswith(KEYS_MODE_PREFIXES)


def response_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    drop = HOP_BY_HOP | connection_tokens(headers)
    return [(k, v) for k, v in headers if k.lower() not in drop]


def connection_tokens(headers: Iterable[tuple[str, str]]) -> frozenset[str]:
    # Headers named in `Connection` are hop-by-hop too (RFC 9110 section 7.6.1).
    names = [v for k, v in headers if k.lower() == "connection"]
    return frozenset(t.strip().lower() for v in names for t in v.split(",") if t.strip())


def decode_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """An ASGI request's raw header pairs as text; latin-1 keeps every byte as it came, so a
    forwarded header reaches the upstream unchanged."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]


def text_header(raw: Iterable[tuple[bytes, bytes]], name: str) -> str | None:
    """A header the proxy itself reads as text: UTF-8, or a 400 that says so."""
    wanted = name.encode("latin-1")
    for k, v in raw:
        if k.lower() == wanted:
            try:
                return v.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest(f"the {name} header is not valid UTF-8", param=name) from None
    return None


class Reported(Protocol):
    """What the headers say of a plan (proxy/request/planning/plan.py: Plan)."""

    @property
    def budget(self) -> Budget | None: ...
    @property
    def tokens_before(self) -> int | None: ...
    @property
    def tokens_after(self) -> int | None: ...
    @property
    def actions(self) -> list[str]: ...
    @property
    def counted(self) -> str: ...
    @property
    def checkpoint(self) -> str | None: ...


def cw_headers(plan: Reported, retries: int) -> list[tuple[str, str]]:
    def num(value: int | None) -> str:
        return "unknown" if value is None else str(value)

    checkpoint = [("x-contextwarden-checkpoint", plan.checkpoint)] if plan.checkpoint else []
    return [
        *checkpoint,
        ("x-contextwarden-tokens-before", num(plan.tokens_before)),
        ("x-contextwarden-tokens-after", num(plan.tokens_after)),
        ("x-contextwarden-budget", num(plan.budget.messages if plan.budget else None)),
        ("x-contextwarden-actions", ",".join(plan.actions) or "none"),
        ("x-contextwarden-retries", str(retries)),
        ("x-contextwarden-count", plan.counted),
    ]


def refused_headers(exc: Exception | None = None) -> list[tuple[str, str]]:
    """The same x-contextwarden-* headers on a request the proxy itself refused: for one that
    cannot be made to fit, its figures (its messages' tokens, what the part that must be kept
    takes, the budget for messages), else ``unknown``."""
    figures = exc if isinstance(exc, ContextTooLarge) else None

    def num(name: str) -> str:
        value = getattr(figures, name, None)
        return "unknown" if value is None else str(value)

    return [
        ("x-contextwarden-tokens-before", num("before")),
        ("x-contextwarden-tokens-after", num("kept")),
        ("x-contextwarden-budget", num("budget")),
        ("x-contextwarden-actions", "rejected"),
        ("x-contextwarden-retries", "0"),
        ("x-contextwarden-count", figures.counted if figures is not None else "none"),
    ]
