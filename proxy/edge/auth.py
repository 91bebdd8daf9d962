"""Who is calling: a team, from a contextwarden key or (passthrough) a header.

    keys          clients present a contextwarden key (``Authorization: Bearer ...``); the
                  upstream key stays server-side and the client's header never goes upstream
    passthrough   the client's own provider key goes upstream; the team comes from
                  ``x-contextwarden-team`` or is the default team

Keys are read from their environment variables once, at start-up, and compared in constant time
against every known key (no early exit, so timing says nothing about which key came close).
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from starlette.datastructures import Headers

from proxy.config.settings import Settings, Team
from proxy.edge.errors import Forbidden, Unauthorized
from proxy.edge.headers import TEAM as TEAM_HEADER


@dataclass(frozen=True, slots=True)
class Principal:
    team: str
    config: Team
    forward_client_auth: bool  # passthrough: the client's Authorization goes upstream
    caller: str | None = None  # passthrough: a keyed hash of the caller's own credential

    @property
    def scope(self) -> str:
        """Whose checkpoints a request may reuse: its team's, and in passthrough mode only the
        ones made with the same provider credential (callers who merely share the default team
        never see, nor spend, each other's summaries)."""
        return self.team if self.caller is None else f"{self.team}~{self.caller}"

    def allows(self, model: str) -> bool:
        """Whether the team may use ``model``: any, or one its list names (a name or a family
        pattern such as ``claude-*``)."""
        listed = self.config.models
        return listed is None or model in listed or any(fnmatchcase(model, p) for p in listed)

    def check_model(self, model: str) -> None:
        if not self.allows(model):
            raise Forbidden(f"team {self.team!r} may not use model {model!r}", param="model")

    def check_tool_models(self, payload: dict[str, Any]) -> None:
        """Hosted tools name billed models of their own (``{"type": "image_generation",
        "model": "gpt-image-1"}``): a team limited to some models may name only those there
        too."""
        tools = payload.get("tools")
        if self.config.models is None or not isinstance(tools, list):
            return
        for i, tool in enumerate(tools):
            model = tool.get("model") if isinstance(tool, dict) else None
            if model is not None and (not isinstance(model, str) or not self.allows(model)):
                raise Forbidden(
                    f"team {self.team!r} may not use model {model!r} (in tools[{i}])",
                    param=f"tools[{i}].model",
                )


class Authenticator:
    def __init__(self, settings: Settings, scope_secret: bytes = b"") -> None:
        self._settings = settings
        # The store's key once it is read (every replica's the same); a random one until then.
        self.scope_secret = scope_secret or secrets.token_bytes(32)
        self._keys: list[tuple[bytes, str]] = [
            (os.environ[env].encode(), team)
            for team, cfg in settings.teams.items()
            for env in cfg.key_envs
            if os.environ.get(env)
        ]
        self._admin = _env_key(settings.admin_key_env)
        self._metrics = _env_key(settings.metrics_key_env)

    def team(self, headers: Headers) -> Principal:
        settings = self._settings
        if settings.auth == "passthrough":
            name = headers.get(TEAM_HEADER) or settings.default_team
            if name not in settings.teams:
                raise Unauthorized(f"unknown team {name!r} in {TEAM_HEADER}", code="unknown_team")
            return Principal(name, settings.teams[name], True, self._caller(headers))
        # Anthropic clients (Claude Code's ANTHROPIC_API_KEY) put the key in x-api-key. It is a
        # credential, so it never goes upstream in this mode.
        presented = bearer(headers) or headers.get("x-api-key") or None
        if presented is None:
            raise Unauthorized(
                "missing API key: send Authorization: Bearer <contextwarden key> (or x-api-key)"
            )
        found = self._match(presented.encode())
        if found is None:
            raise Unauthorized("invalid API key")
        return Principal(found, settings.teams[found], False)

    def admin(self, headers: Headers) -> None:
        presented = bearer(headers)
        if self._admin is None:
            raise Forbidden("the admin API is disabled: set admin_key_env", code="admin_disabled")
        if presented is None or not hmac.compare_digest(presented.encode(), self._admin):
            raise Unauthorized("invalid admin key")

    def metrics(self, headers: Headers) -> None:
        """``/metrics`` needs the key ``metrics_key_env`` names (the admin key works too). In
        ``keys`` mode it needs one of them always (team names and per-team cost counters are
        no business of another team's key holder); in passthrough it is open when none is
        set."""
        allowed = [k for k in (self._metrics, self._admin) if k is not None]
        if self._metrics is None and self._settings.auth == "passthrough":
            return
        if not allowed:
            raise Forbidden(
                "/metrics is closed in keys mode until metrics_key_env (or admin_key_env) names "
                "a key",
                code="metrics_disabled",
            )
        presented = (bearer(headers) or "").encode()
        if not any([hmac.compare_digest(presented, k) for k in allowed]):
            raise Unauthorized("/metrics needs the metrics key: Authorization: Bearer <key>")

    def _caller(self, headers: Headers) -> str | None:
        credential = caller_credential(headers)
        if not credential:
            return None
        digest = hmac.digest(self.scope_secret, credential.encode(), "sha256")  # one C call
        return digest.hex()[:32]  # the credential itself is never kept

    def _match(self, presented: bytes) -> str | None:
        found = None
        for key, team in self._keys:
            if hmac.compare_digest(presented, key) and found is None:
                found = team
        return found


def _env_key(env: str | None) -> bytes | None:
    value = os.environ.get(env) if env else None
    return value.encode() if value else None


def caller_credential(headers: Headers) -> str | None:
    """The client's own upstream credential, whichever header it came in: ``Authorization``
    (OpenAI's SDKs), ``x-api-key`` (Anthropic's, Claude Code) or ``api-key`` (Azure's)."""
    return bearer(headers) or headers.get("x-api-key") or headers.get("api-key") or None


def bearer(headers: Headers) -> str | None:
    value = headers.get("authorization")
    if value and value.lower().startswith("bearer "):
        return value[7:].strip() or None
    return None
