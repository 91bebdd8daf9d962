"""Configuration: one YAML file, overridden by ``CONTEXTWARDEN_*`` environment variables.

What is served (upstreams, models, their prices) is declared in ``proxy/config/catalog.py``.
Precedence lives in one place, :meth:`Settings.settings_customise_sources`: environment over the
YAML file over defaults. Every model forbids unknown keys, so a typo fails at start-up with the
file and the key named. Secrets are never written in the file: an upstream names the environment
variable that holds its key (``api_key_env``), read once when the config is loaded.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from proxy.config.catalog import ModelEntry, Strict, Upstream
from proxy.config.credentials import misdirected_credentials
from proxy.config.defaults import with_default_upstreams
from proxy.config.policies import PolicyConfig, resolve_extends
from proxy.paths import DEFAULT_FORWARD
from proxy.providers.registry import provider_of

# The command line's options (``serve --port``), while a Settings is made: above the
# environment, and validated by the same fields as the file.
_FLAGS: ContextVar[Mapping[str, Any] | None] = ContextVar("contextwarden_flags", default=None)
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file and the key."""


class Trimming(Strict):
    reserve_output_tokens: int = Field(4096, ge=0)
    safety_margin_tokens: int = Field(16, ge=0)
    estimate_ratio: float = Field(1.2, ge=1.0)
    max_overflow_retries: int = Field(2, ge=0, le=10)
    overflow_shrink: float = Field(0.15, gt=0, lt=1)
    learned_retry_seconds: float = Field(
        3600,
        ge=0,
        description="a learned window that holds requests back lets one through past it after "
        "this long (0: never by time)",
    )
    learned_retry_requests: int = Field(
        100, ge=0, description="or at the n-th request it held back (0: never by count)"
    )


# A Redis Sentinel's address: [host, port], or "host:port" (Checkpoints._nodes).
SentinelNode = tuple[Annotated[str, Field(min_length=1)], Annotated[int, Field(ge=1, le=65535)]]
# What only the Sentinels' store takes (a url carries its own password and database).
SENTINEL_ONLY = ("service_name", "sentinel_password_env", "password_env", "db")


class Checkpoints(Strict):
    backend: Literal["sqlite", "redis"] = "sqlite"
    url: str | None = Field(None, description="redis://host:port/db, for backend: redis")
    sentinel_nodes: list[SentinelNode] = Field(
        default_factory=list,
        description="for backend: redis instead of url: the Redis Sentinels that name the "
        "primary, each host:port or [host, port] (LiteLLM's sentinel_nodes)",
    )
    service_name: str | None = Field(
        None, description="with sentinel_nodes: the name they monitor the primary by"
    )
    sentinel_password_env: str | None = Field(
        None,
        description="with sentinel_nodes: env var holding the Sentinels' own password "
        "(LiteLLM's sentinel_password)",
    )
    password_env: str | None = Field(
        None, description="with sentinel_nodes: env var holding the primary's password"
    )
    db: int = Field(0, ge=0, description="with sentinel_nodes: the database number")
    ttl_seconds: float = Field(7 * 24 * 3600, gt=0)
    max_entries: int = Field(100_000, gt=0)
    max_per_conversation: int = Field(16, gt=0)
    timeout_seconds: float = Field(
        1.0, gt=0, description="bound on each store call; past it the request truncates"
    )
    max_bytes: int = Field(
        1 << 30,
        ge=1 << 20,
        description="what the store may hold, every team's objects together (bytes); past it "
        "the oldest go (proxy/stores/quota.py)",
    )
    max_bytes_per_team: int | None = Field(
        None,
        ge=1 << 16,
        description="what one team (in passthrough, one caller) may hold (bytes); past it its "
        "own oldest go; null: a quarter of max_bytes",
    )

    # The passwords sentinel_password_env and password_env name, read when the config is loaded.
    _passwords: tuple[str | None, str | None] = PrivateAttr(default=(None, None))

    @field_validator("sentinel_nodes", mode="before")
    @classmethod
    def _nodes(cls, nodes: Any) -> Any:
        if not isinstance(nodes, list):
            return nodes  # pydantic says what is wrong with it
        return [_host_port(n) if isinstance(n, str) else n for n in nodes]

    @model_validator(mode="after")
    def _url(self) -> Checkpoints:
        if self.backend == "redis" and not (self.url or self.sentinel_nodes):
            raise ValueError(
                "backend: redis needs url (e.g. redis://localhost:6379/0), or sentinel_nodes "
                "and service_name (the Redis Sentinels that name the primary)"
            )
        if self.sentinel_nodes:
            self._passwords = _sentinel_passwords(self)
        elif given := [key for key in SENTINEL_ONLY if getattr(self, key)]:
            raise ValueError(
                f"{', '.join(given)}: only with sentinel_nodes (a url carries its own "
                "password and database: redis://:password@host:6379/0)"
            )
        if self.max_bytes_per_team is not None and self.max_bytes_per_team > self.max_bytes:
            raise ValueError("max_bytes_per_team is more than max_bytes")
        return self

    @property
    def sentinel_password(self) -> str | None:
        """The Sentinels' password, read from ``sentinel_password_env`` at load."""
        return self._passwords[0]

    @property
    def password(self) -> str | None:
        """The primary's password (with ``sentinel_nodes``), read from ``password_env``."""
        return self._passwords[1]


def _host_port(node: str) -> tuple[str, str]:
    host, colon, port = node.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise ValueError(f"{node!r} is not host:port (e.g. sentinel-1:26379)")
    return host.strip("[]"), port  # [::1]:26379 too


def _sentinel_passwords(config: Checkpoints) -> tuple[str | None, str | None]:
    """The passwords the Sentinels' settings name, once they hold together."""
    if config.backend != "redis":
        raise ValueError("sentinel_nodes is for backend: redis")
    if config.url:
        raise ValueError("url or sentinel_nodes, not both: the Sentinels name the primary")
    if not config.service_name:
        raise ValueError(
            "sentinel_nodes needs service_name: the name the Sentinels monitor the primary by "
            "(`sentinel monitor <name> <host> <port> <quorum>` in sentinel.conf), e.g. mymaster"
        )
    # An unset one is said at start (proxy/config/startup.py), as an unset key is: without it
    # the store connects without a password, and is refused until it is set.
    envs = (config.sentinel_password_env, config.password_env)
    sentinels, primary = ((os.environ.get(name) or None) if name else None for name in envs)
    return sentinels, primary


class Limits(Strict):
    max_body_bytes: int = Field(32 * 1024 * 1024, gt=0)
    max_json_nodes: int = Field(
        100_000,
        gt=0,
        description="JSON values one body may hold, every leaf counted (edge/admission.py)",
    )
    large_body_bytes: int = Field(
        1024 * 1024, gt=0, description="from this size a body is parsed off the event loop"
    )
    large_bodies_per_team: int = Field(
        1, gt=0, description="large bodies of one team in the proxy at once; more wait"
    )
    memory_budget_mb: int = Field(
        768,
        ge=64,
        description="what one process may hold (MiB): its footprint, then its caches share the "
        "rest, less the large bodies in flight (proxy/observe/memory.py); the rest of a request "
        "in flight comes on top",
    )


class Team(Strict):
    key_envs: list[str] = Field(default_factory=list, description="env vars holding its keys")
    policy: str | None = None
    models: list[str] | None = Field(None, description="models it may use; null: any")
    max_context_tokens: int | None = Field(None, gt=0, description="a window below the model's")
    reserve_output_tokens: int | None = Field(None, ge=0)
    allowed_policies: list[str] = Field(
        default_factory=list, description="policies a request may choose for itself"
    )
    allow_disable_trimming: bool = False
    allow_session_memory: bool = Field(
        False, description="may send session memory (it becomes the summary checkpoint)"
    )
    summarizer_calls_per_hour: int | None = Field(
        None, gt=0, description="cap on this team's summarizer calls; over it, truncation"
    )
    mode: Literal["enforce", "shadow"] | None = Field(
        None,
        description="shadow: requests go upstream as sent, what the proxy would have done is "
        "recorded (proxy/edge/shadow.py); null: the policy's mode",
    )
    shadow_summarizer_calls_per_hour: int = Field(
        0,
        ge=0,
        description="in shadow mode, summarizer calls this team's shadow plans may make an "
        "hour; 0: none (a summary is estimated, never made)",
    )
    hosted_tools: list[str] | None = Field(
        None,
        description="hosted (server-run, billed) tools it may use: web_search, file_search, "
        "code_interpreter, image_generation, mcp, code_execution, web_fetch...; null: any "
        "when models is null, none when models lists some (edge/auth.py)",
    )
    paid_options: (
        list[Literal["priority", "background", "fast", "inference_geo", "n", "best_of"]] | None
    ) = Field(
        None,
        description="paid options it may ask for (service_tier: priority, scale, fast or "
        "ultrafast; background: true; Anthropic's speed: fast and inference_geo; n or best_of "
        "other than 1); null: any when models is null, none when models lists some",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CONTEXTWARDEN_", env_nested_delimiter="__", extra="forbid"
    )

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    workers: int = Field(
        1, ge=1, le=256, description="serving processes on the one port (serve --workers)"
    )
    shutdown_grace_seconds: int = Field(
        30,
        ge=0,
        description="at shutdown, how long requests in flight (streams) may take to finish",
    )
    default_upstream: str = Field(
        "", description="default: the only upstream, else the one named openai"
    )
    upstreams: dict[str, Upstream] = Field(default_factory=dict)
    models: dict[str, ModelEntry] = Field(default_factory=dict)
    default_policy: str = "default"
    policies: dict[str, PolicyConfig] = Field(default_factory=lambda: {"default": PolicyConfig()})
    trimming: Trimming = Trimming()
    limits: Limits = Limits()
    data_dir: str = "./.contextwarden"
    checkpoints: Checkpoints = Checkpoints()
    auth: Literal["passthrough", "keys"] = "passthrough"
    admin_key_env: str | None = None
    default_team: str = "default"
    credential_headers: list[str] = Field(
        default_factory=list,
        description="passthrough: headers that tell callers apart besides those named like a "
        "credential (*key*, *token*, *secret*, *auth*, *cookie*, *password*)",
    )
    teams: dict[str, Team] = Field(default_factory=dict)
    log_content: bool = False
    allow_open_proxy: bool = Field(
        False,
        description="passthrough on a non-loopback address with a proxy-held upstream key",
    )
    forward_paths: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FORWARD),
        description="keys mode: /v1/<path> globs forwarded untouched besides the fitted ones",
    )
    metrics_key_env: str | None = Field(None, description="env var of a key /metrics requires")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names the proxy answers to when it holds keys; default: loopback "
        "names when bound to loopback (proxy/edge/origins.py)",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="browser origins that may make the proxy spend its keys; default none",
    )
    _keys: dict[str, str | None] = PrivateAttr(default_factory=dict)  # upstream -> key, at load
    # The file configured no upstreams: it is served with the embedded default's.
    _default_upstreams: bool = PrivateAttr(default=False)
    caches: bool = Field(
        True,
        description="off: no cross-request cache (for debugging: every request parsed, "
        "digested and counted afresh, the same answer; proxy/observe/memory.py CACHES)",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,  # vulture: pydantic-settings passes it by name
        file_secret_settings: PydanticBaseSettingsSource,  # vulture: passed by name too
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init kwargs; the environment overrides it, and the command
        # line's options override both.
        return (_Flags(settings_cls), env_settings, init_settings)

    @field_validator("host")
    @classmethod
    def _host(cls, host: str) -> str:
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            if not _HOST.match(host):
                raise ValueError(
                    f"{host!r} is not an address to listen on: an IP address or a host name, "
                    "without a scheme or a port (e.g. 127.0.0.1, 0.0.0.0, ::1, localhost)"
                ) from None
        return host

    @property
    def upstreams_defaulted(self) -> bool:
        """Whether the upstreams are the embedded default's (the file configured none)."""
        return self._default_upstreams

    @model_validator(mode="before")
    @classmethod
    def _extends(cls, data: Any) -> Any:
        if isinstance(data, dict) and "upstream_client" in data:
            raise ValueError(
                "upstream_client was removed: aiohttp is the one upstream transport now "
                "(CHANGELOG, #48); delete the line"
            )
        if isinstance(data, dict) and isinstance(data.get("policies"), dict):
            data = {**data, "policies": resolve_extends(data["policies"])}
        return data

    @model_validator(mode="after")
    def _references(self) -> Settings:
        # Every cross-reference mistake is reported in one run, not one per run.
        self.policies.setdefault("default", PolicyConfig())
        if not self.upstreams:
            raise ValueError("no upstreams configured: add one under `upstreams:`")
        if not self.default_upstream:
            self.default_upstream = _default_upstream(list(self.upstreams))
        self.teams.setdefault(self.default_team, Team())
        problems = reference_problems(self.model_dump(exclude={"models"}), self.models)
        if problems:
            raise ValueError("; ".join(problems))
        self._keys = {
            name: (os.environ.get(u.api_key_env) or None) if u.api_key_env else None
            for name, u in self.upstreams.items()
        }
        misdirected = misdirected_credentials(self)  # a caller's key goes where it was sent
        if misdirected:
            raise ValueError("; ".join(misdirected))
        return self

    @property
    def shared_store(self) -> bool:
        """Whether other processes write the store too: Redis (replicas), or an SQLite file
        shared by ``workers``. Then what a process remembers of a conversation is only a cache
        of the store, which is read and written on each request."""
        return self.checkpoints.backend == "redis" or self.workers > 1

    def exposure_problem(self) -> str | None:
        """Why serving on ``host`` would let anybody on the network spend the operator's
        upstream key, or None. Passthrough mode authenticates nobody, so a proxy-held key on a
        non-loopback address is an open proxy unless ``allow_open_proxy`` says it is meant."""
        if self.auth != "passthrough" or self.allow_open_proxy or is_loopback(self.host):
            return None
        held = [
            name
            for name, u in self.upstreams.items()
            if provider_of(u).own_credentials or self.holds_key(name)
        ]
        if not held:
            return None
        return (
            f"refusing to serve on {self.host}: auth is passthrough and upstream(s) "
            f"{', '.join(sorted(held))} use a key held by the proxy (a litellm upstream may read "
            "its provider's key from the environment), so anybody who reaches this address "
            "could spend it. Use `auth: keys` with team keys, listen on 127.0.0.1, or set "
            "`allow_open_proxy: true` if a network boundary already restricts who connects."
        )

    def holds_key(self, upstream: str) -> bool:
        """Whether the proxy spends a credential of its own on this upstream: a key from
        ``api_key_env``, or one written in its ``headers:``."""
        config = self.upstreams[upstream]
        return bool(self.api_key(upstream) or config.header_credentials)

    @property
    def spends_own_keys(self) -> bool:
        """Whether any upstream is reached with a credential the proxy holds (a litellm
        upstream may read its provider's key from the environment)."""
        return any(
            provider_of(u).own_credentials or self.holds_key(name)
            for name, u in self.upstreams.items()
        )

    def api_key(self, upstream: str) -> str | None:
        """The upstream's key, read from its environment variable when the config was loaded
        (None: the client's own credential goes through)."""
        return self._keys.get(upstream)


def reference_problems(data: dict[str, Any], models: dict[str, Any] | None = None) -> list[str]:
    """Each name the configuration uses that it does not define. ``data`` may be the raw
    file (when its fields did not validate, so that every mistake comes in one run: wrong
    shapes are skipped here, they have their own errors) or the validated settings dumped."""
    policies = set(_mapping(data.get("policies"))) | {"default"}
    upstreams = set(_mapping(data.get("upstreams")))
    problems: list[str] = []
    default_policy = data.get("default_policy", "default")
    if isinstance(default_policy, str) and default_policy not in policies:
        problems.append(f"default_policy {default_policy!r} is not in policies")
    default_upstream = data.get("default_upstream")
    named = isinstance(default_upstream, str) and bool(default_upstream)
    if upstreams and named and default_upstream not in upstreams:
        problems.append(
            f"default_upstream {default_upstream!r} is not in upstreams "
            f"({', '.join(sorted(upstreams))})"
        )
    entries = models if models is not None else _mapping(data.get("models"))
    for name, entry in entries.items():
        upstream, policy = _field(entry, "upstream"), _field(entry, "policy")
        if isinstance(upstream, str) and upstreams and upstream not in upstreams:
            problems.append(f"models.{name}.upstream {upstream!r} is not in upstreams")
        if isinstance(policy, str) and policy not in policies:
            problems.append(f"models.{name}.policy {policy!r} is not in policies")
    teams = _mapping(data.get("teams"))
    for name, team in teams.items():
        chosen = _field(team, "policy")
        allowed = _field(team, "allowed_policies")
        for policy in [chosen, *(allowed if isinstance(allowed, list) else [])]:
            if isinstance(policy, str) and policy not in policies:
                problems.append(f"teams.{name}: policy {policy!r} is not in policies")
    keyed = any(_field(t, "key_envs") for t in teams.values())
    if data.get("auth") == "keys" and not keyed:
        problems.append("auth: keys needs at least one team with key_envs")
    return problems


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _field(entry: Any, name: str) -> Any:
    return entry.get(name) if isinstance(entry, dict) else getattr(entry, name, None)


def _default_upstream(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    if "openai" in names:
        return "openai"
    listed = ", ".join(sorted(names))
    raise ValueError(f"default_upstream is required with several upstreams; name one of: {listed}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Flags(PydanticBaseSettingsSource):
    """The command line's options, as a settings source (see ``load_settings``'s ``flags``)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return (_FLAGS.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FLAGS.get() or {})


@contextmanager
def _flags(flags: Mapping[str, Any]) -> Iterator[None]:
    token = _FLAGS.set(flags)
    try:
        yield
    finally:
        _FLAGS.reset(token)


def load_settings(
    path: str | Path | None = None, *, flags: Mapping[str, Any] | None = None, **overrides: Any
) -> Settings:
    """Load ``path`` (or the embedded default), apply the environment, then ``flags`` (the
    command line's options, by key: they beat the environment), validate. A file that
    configures no upstreams gets the embedded default's."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    source = str(path) if path else "embedded default config"
    if flags:
        source += " with " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in flags.items())
    data = _read_yaml(Path(path)) if path else {}
    data.update(overrides)
    defaulted = with_default_upstreams(data)
    try:
        with _flags(flags):
            settings = Settings(**data)
    except ValidationError as exc:
        # Field errors stop pydantic before the cross-references are checked: check those on
        # the file itself, so that every mistake comes in one run.
        messages = " ".join(str(e["msg"]) for e in exc.errors())
        more = [p for p in reference_problems(data) if p not in messages]
        raise ConfigError(format_errors(source, exc, more)) from None
    settings._default_upstreams = defaulted
    return settings


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as stream:  # a YAML error then names the file
            loaded = yaml.safe_load(stream)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    return loaded


def format_errors(source: str, exc: ValidationError, more: list[str] | None = None) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  {key}: {err['msg']}")
    lines += [f"  {problem}" for problem in more or []]
    return "\n".join(lines)
