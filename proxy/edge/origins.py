"""Who may make the proxy spend its own keys: the Host and Origin checks.

A proxy on loopback that holds an upstream key (``api_key_env``, a credential in ``headers:``, a
litellm upstream) is reachable by any web page the operator opens: a cross-site ``text/plain``
POST needs no preflight, and DNS rebinding lets the page read the answer. So, whenever the proxy
spends a key of its own, ``TrustedCallers`` refuses with 403, before routing:

- a request whose ``Host`` is not one the proxy serves under: ``allowed_hosts`` when set; else,
  bound to a loopback address, the loopback names (``localhost``, ``127.0.0.0/8``, ``[::1]``).
  Bound elsewhere (the open-proxy check already demanded ``allow_open_proxy`` or team keys),
  any Host passes unless ``allowed_hosts`` lists them. A rebound DNS name is never one of them;
- a request with an ``Origin`` header (a browser's) that ``allowed_origins`` does not list.
  SDKs and agent CLIs send none.

A WebSocket handshake (the Responses API's WebSocket mode) is checked the same way, and refused
before it is accepted: a browser page opens one with its own Origin.

``/health`` and ``/ready`` are exempt: they spend nothing (a load balancer's health checks
send no Host of the proxy's).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.config.settings import Settings, is_loopback
from proxy.paths import is_messages_path, refuse

EXEMPT = frozenset({"/health", "/ready"})


class TrustedCallers:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.active = settings.spends_own_keys
        self.hosts = frozenset(h.lower() for h in settings.allowed_hosts)
        self.loopback_only = not self.hosts and is_loopback(settings.host)
        self.origins = frozenset(o.lower().rstrip("/") for o in settings.allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guarded = scope["type"] in ("http", "websocket") and scope["path"] not in EXEMPT
        if self.active and guarded:
            reason = self.refusal(scope["headers"])
            if reason is not None:
                anthropic = is_messages_path(scope["path"])
                kind, code = "permission_error", "untrusted_caller"
                await refuse(send, 403, reason, anthropic, kind, code, scope, receive)
                return
        await self.app(scope, receive, send)

    def refusal(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        host = origin = None
        for k, v in headers:
            if k == b"host":
                host = v.decode("latin-1").lower()
            elif k == b"origin":
                origin = v.decode("latin-1").lower().rstrip("/")
        if origin is not None and origin not in self.origins:
            return (
                f"requests from a browser page ({origin}) may not spend the proxy's keys; the "
                "operator may list the origin in allowed_origins"
            )
        name = _hostname(host or "")
        if self.hosts and name not in self.hosts and (host or "") not in self.hosts:
            return f"the Host {host!r} is not one this proxy serves (allowed_hosts)"
        if self.loopback_only and not is_loopback(name):
            return (
                f"the Host {host!r} is not a loopback name; a proxy on loopback that holds keys "
                "answers only to localhost, 127.0.0.1 or [::1] (list others in allowed_hosts)"
            )
        return None


def _hostname(host: str) -> str:
    """The Host header without its port (``[::1]:8080`` -> ``[::1]``)."""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
