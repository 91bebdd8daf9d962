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
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import Headers

from proxy.config.catalog import CREDENTIAL_NAME
from proxy.config.settings import Settings, Team
from proxy.errors import Forbidden, Unauthorized
from proxy.headers import REQUEST_DROP
from proxy.headers import TEAM as TEAM_HEADER
from proxy.wire import Credential


@dataclass(kw_only=True, frozen=True, slots=True)
class Principal:
    team: str
    config: Team
    forward_client_auth: bool  # passthrough: the client's Authorization goes upstream
    # A keyed hash of the credential presented: the team key in keys mode, the caller's own
    # provider credentials in passthrough; None for a passthrough caller who sent none.
    caller: str | None = None
    # A passthrough caller who sent no credential: this request's own name (random), under
    # which it keeps the originals it offers to recall (``proxy/request/recall.py``).
    alone: str = ""

    @property
    def scope(self) -> str:
        """Whose per-conversation state a request may see (checkpoints, sticky cuts, the prefix
        fingerprint, recent items): the ones made with the same credential. Users of one team
        who hold keys of their own, and passthrough callers who merely share the default team,
        never see, nor spend, each other's. Callers without a credential are one caller, the
        team's: a checkpoint or a cut is found only by the messages it covers, so it carries
        nothing such a caller did not send (recall's originals, which do, are each request's
        own)."""
        return self.team if self.caller is None else f"{self.team}~{self.caller}"

    @property
    def learns_as(self) -> str:
        """Whose learned windows and calibration a request reads and teaches: its team's in
        keys mode; in passthrough, where anybody may claim a team, its caller's (callers
        without a credential are one caller), so no caller can shrink a window for another."""
        return self.scope if self.forward_client_auth else self.team

    def allows(self, model: str) -> bool:
        """Whether the team may use ``model``: any, or one its list names (a name or a family
        pattern such as ``claude-*``)."""
        listed = self.config.models
        return listed is None or model in listed or any(fnmatchcase(model, p) for p in listed)

    def check_model(self, model: str) -> None:
        if not self.allows(model):
            raise Forbidden(f"team {self.team!r} may not use model {model!r}", param="model")

    def check_spend(self, payload: dict[str, Any]) -> None:
        """What a body may spend beyond its model: hosted tools (run and billed by the
        provider: web search, code interpreter...) and the models they name, and paid options
        (``service_tier: priority``, ``background``, fast mode, a pinned region, and the
        multipliers ``n`` and ``best_of``). A team limited to some models may use
        only the hosted tools and paid options it lists (none by default); a team with any
        model, any unless it lists some."""
        tools = payload.get("tools")
        hosted = (
            [(i, t) for i, t in enumerate(tools) if hosted_tool(t)]
            if isinstance(tools, list)
            else []
        )
        if "web_search_options" in payload:  # chat completions' search models
            hosted.append((-1, {"type": "web_search"}))
        for i, tool in hosted:
            self._check_tool(i, tool)
        for option, param in paid_options(payload):
            if not self._allowed(self.config.paid_options, option):
                raise Forbidden(
                    f"team {self.team!r} may not use the paid option {option!r} "
                    "(teams.*.paid_options)",
                    param=param,
                    code="option_not_allowed",
                )

    def _check_tool(self, i: int, tool: dict[str, Any]) -> None:
        where = f"tools[{i}]" if i >= 0 else "web_search_options"
        name = hosted_tool(tool)
        if not self._allowed(self.config.hosted_tools, name):
            raise Forbidden(
                f"team {self.team!r} may not use the hosted tool {name!r} (teams.*.hosted_tools)",
                param=where,
                code="tool_not_allowed",
            )
        # Hosted tools name billed models of their own ({"type": "image_generation",
        # "model": "gpt-image-1"}): a team limited to some models may name only those.
        model = tool.get("model")
        limited = self.config.models is not None and model is not None
        if limited and (not isinstance(model, str) or not self.allows(model)):
            raise Forbidden(
                f"team {self.team!r} may not use model {model!r} (in {where})",
                param=f"{where}.model",
            )

    def _allowed(self, listed: list[str] | list[Any] | None, name: str) -> bool:
        if listed is None:
            return self.config.models is None
        return name in listed


# Tools the client runs itself (the provider only asks for a call): never a hosted spend.
CLIENT_TOOLS = frozenset(
    {"function", "custom", "bash", "text_editor", "computer", "memory", "local_shell", "shell",
     "apply_patch"}
)  # fmt: skip
_VERSION = re.compile(r"(_preview)?(_\d{4}_?\d{2}_?\d{2})?$")


def hosted_tool(tool: object) -> str:
    """A tool's hosted name (``web_search`` for ``web_search_20250305`` or
    ``web_search_preview``), or "" for a tool the client runs (functions, custom tools, and
    Anthropic's and OpenAI's client-side tools)."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    if not isinstance(kind, str):
        return ""
    name = _VERSION.sub("", kind)
    return "" if name in CLIENT_TOOLS else name


# OpenAI's tiers billed above the default ("fast" is served, and billed, as "priority").
PRIORITY_TIERS = frozenset({"priority", "scale", "fast", "ultrafast"})
# Fields whose value, anything but 1, multiplies what one request bills: chat's and
# completions' ``n`` (and the images API's, on a forwarded path) and completions' ``best_of``
# (each candidate generated and billed). ``top_logprobs`` does not multiply, nor does anything
# in Responses or Anthropic Messages, which generate one answer.
MULTIPLIERS = ("n", "best_of")
# Every top-level field ``Principal.check_spend`` reads: what a forwarded body keeps of itself.
SPEND_FIELDS = (
    "tools", "web_search_options", "service_tier", "background", "speed", "inference_geo",
    *MULTIPLIERS,
)  # fmt: skip


def paid_options(payload: dict[str, Any]) -> list[tuple[str, str]]:
    """The paid options a body asks for, with the field that asks. A multiplier counts at any
    value but 1 or null, so a value the upstream might read as more than one ("128", 2.0) is a
    paid option too; the format's own validation refuses what is no count at all."""
    found = []
    if payload.get("service_tier") in PRIORITY_TIERS:
        found.append(("priority", "service_tier"))
    if payload.get("background") is True:
        found.append(("background", "background"))
    if payload.get("speed") == "fast":  # Anthropic's fast mode: a multiple of the usual rates
        found.append(("fast", "speed"))
    if payload.get("inference_geo") not in (None, "global"):  # Anthropic's pinned region
        found.append(("inference_geo", "inference_geo"))
    found += [(m, m) for m in MULTIPLIERS if m in payload and payload[m] not in (None, 1)]
    return found


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

    def team(self, headers: Headers, query: str = "") -> Principal:
        """The team and caller of a request with ``headers`` and ``query`` (its query string,
        which may carry a credential too: Google's ``?key=``)."""
        settings = self._settings
        if settings.auth == "passthrough":
            name = headers.get(TEAM_HEADER) or settings.default_team
            if name not in settings.teams:
                raise Unauthorized(f"unknown team {name!r} in {TEAM_HEADER}", code="unknown_team")
            caller = self._caller(headers, query)
            alone = "" if caller is not None else secrets.token_hex(8)
            return Principal(
                team=name,
                config=settings.teams[name],
                forward_client_auth=True,
                caller=caller,
                alone=alone,
            )
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
        return Principal(
            team=found,
            config=settings.teams[found],
            forward_client_auth=False,
            caller=self._digest(presented),
        )

    def admin(self, headers: Headers) -> None:
        presented = bearer(headers)
        if self._admin is None:
            admin = self._settings.admin_key_env
            how = (
                f"set {admin}, the variable the config names for its key"
                if admin
                else "name the variable that holds its key in the config "
                "(admin_key_env: CW_ADMIN_KEY) and set it"
            )
            raise Forbidden(f"the admin API is disabled: {how}", code="admin_disabled")
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

    def _caller(self, headers: Headers, query: str = "") -> str | None:
        presented = caller_identity(headers, self._settings.credential_headers, query)
        return None if presented is None else self._digest(presented)

    def _digest(self, credential: str) -> str:
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


def caller_credential(headers: Headers) -> Credential | None:
    """The client's own upstream credential, whichever header it came in."""
    token = bearer(headers)
    if token:
        return Credential(token, "authorization")
    for name in ("x-api-key", "api-key"):
        value = headers.get(name)
        if value:
            return Credential(value, name)
    return None


# Headers whose names say credential but that carry none: what an SDK sends for every call.
NOT_CREDENTIALS = frozenset({"idempotency-key"})


def caller_identity(
    headers: Headers, configured: Iterable[str] = (), query: str = ""
) -> str | None:
    """What makes a passthrough caller: every credential the request carries upstream, in
    whatever header (a bearer or HTTP Basic ``Authorization``, ``x-api-key``, Google's
    ``x-goog-api-key``, a gateway's own token, a cookie), the headers the config names
    (``credential_headers``) and the parameters of its query string whose names say
    credential (Google's ``?key=``, ``?access_token=``: the query is forwarded too). Two
    callers with different credentials of any kind are two callers; None when the request
    carries none. One bearer, ``x-api-key`` or ``api-key`` alone is its value (the identity
    callers had before other headers counted)."""
    named = {n.lower() for n in configured}
    found = sorted(
        (name, value)
        for name, value in headers.items()
        if value
        and name not in REQUEST_DROP
        and name not in NOT_CREDENTIALS
        and (name in named or CREDENTIAL_NAME.search(name))
    )
    if query:
        found += sorted(
            (f"?{name}", value)
            for name, value in parse_qsl(query, keep_blank_values=False)
            if CREDENTIAL_NAME.search(name)
        )
    if not found:
        return None
    single = caller_credential(headers)
    if single is not None and len(found) == 1 and found[0][0] == single.header:
        return single.value
    return "\n".join(f"{name}: {value}" for name, value in found)


def bearer(headers: Headers) -> str | None:
    value = headers.get("authorization")
    if value and value.lower().startswith("bearer "):
        return value[7:].strip() or None
    return None
