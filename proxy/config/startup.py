"""What ``serve`` checks and says before it listens, beside the configuration's own validation.

self_loop_problem  an upstream at the proxy's own address (clients and the proxy read the same
                   ``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` when both run in one shell):
                   every request would come back to the proxy, so it does not start
client_url         where a client on this machine reaches the proxy (loopback for a wildcard)
key_notes          each key variable the config names that is unset (or empty), and what that
                   means for who can call and which upstream gets which key (and the store's
                   password variables)
"""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlsplit

from proxy.config.defaults import origin_of
from proxy.config.settings import Settings, is_loopback
from proxy.providers.registry import provider_of

DEFAULT_PORTS = {"http": 80, "https": 443}
WILDCARDS = ("0.0.0.0", "::", "[::]", "")


def client_url(host: str, port: int) -> str:
    """The address a client on this machine reaches a proxy listening on ``host`` at: a
    wildcard (every address) is reached at loopback, an IPv6 address in brackets."""
    if host in WILDCARDS:
        host = "::1" if ":" in host else "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def self_loop_problem(settings: Settings) -> str | None:
    """Why an upstream would send the proxy's requests back to itself, or None."""
    for name, upstream in settings.upstreams.items():
        url = upstream.base_url
        if url is None or not points_at_proxy(url, settings.host, settings.port):
            continue
        origin = origin_of(name, url) if settings.upstreams_defaulted else None
        told = f", from {origin}" if origin else ""
        fix = (
            f"start the proxy without {origin} (`env -u {origin} contextwarden serve`: clients "
            f"may keep theirs), or set it to the provider's address"
            if origin
            else f"point upstreams.{name}.base_url at the provider, or serve on another port "
            "(--port)"
        )
        return (
            f"refusing to start: upstream {name!r} ({url}{told}) is this proxy's own address "
            f"(http://{settings.host}:{settings.port}), so every request would come back to the "
            f"proxy. Clients and the proxy read the same variables when they run in one shell: "
            f"{fix}."
        )
    return None


def points_at_proxy(url: str, host: str, port: int) -> bool:
    """Whether ``url`` reaches a proxy listening on ``host``:``port`` (plain HTTP). Names are
    resolved only when the port is the proxy's."""
    try:
        parts = urlsplit(url)
        target = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    if parts.scheme != "http" or target != port or not parts.hostname:
        return False
    name = parts.hostname
    wildcard = host in WILDCARDS
    if is_loopback(name):
        return wildcard or is_loopback(host)
    addresses = _addresses(name)
    if wildcard:
        return bool(addresses & (_own_addresses() | {"127.0.0.1", "::1"})) or any(
            _loopback_ip(a) for a in addresses
        )
    return bool(addresses & _addresses(host))


def _addresses(name: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
    except (OSError, UnicodeError):
        return set()


def _own_addresses() -> set[str]:
    return _addresses(socket.gethostname()) | _addresses(socket.getfqdn())


def _loopback_ip(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def key_notes(settings: Settings) -> list[str]:
    """One line per key variable the config names that is unset or empty (and per upstream
    that can get no key at all), saying what it means."""
    keys = settings.auth == "keys"
    notes = [_upstream_note(settings, name, keys) for name in settings.upstreams]
    out = [n for n in notes if n]
    if keys:
        out += _team_notes(settings)
    admin = settings.admin_key_env
    if admin and not os.environ.get(admin):
        out.append(f"{admin} is not set: the admin API (/admin/*) answers 403 until it is")
    metrics = settings.metrics_key_env
    if metrics and not os.environ.get(metrics):
        opened = admin and os.environ.get(admin)
        if keys:
            who = "the admin key only" if opened else "no key: it is closed"
        else:
            who = "the admin key only" if opened else "anybody (it is open)"
        out.append(f"{metrics} is not set: /metrics takes {who}")
    out += _store_notes(settings)
    return out


def _store_notes(settings: Settings) -> list[str]:
    """The Redis Sentinel store's password variables that are unset (proxy/stores/sentinel.py)."""
    config = settings.checkpoints
    named = {"the Sentinels": config.sentinel_password_env, "the primary": config.password_env}
    return [
        f"{env} is not set: the checkpoint store logs in to {whom} without a password"
        for whom, env in named.items()
        if config.sentinel_nodes and env and not os.environ.get(env)
    ]


def _upstream_note(settings: Settings, name: str, keys: bool) -> str | None:
    upstream = settings.upstreams[name]
    env = upstream.api_key_env
    if settings.holds_key(name):
        return None
    if provider_of(upstream).own_credentials:
        if not env or os.environ.get(env):
            return None
        return f"{env} is not set: upstream {name!r} (litellm) calls its provider with " + (
            "the provider's own variable, if litellm finds one" if keys else "the caller's key"
        )
    if not keys:
        if env:
            return f"{env} is not set: upstream {name!r} gets each caller's own key (passthrough)"
        return None
    said = f"{env} is not set" if env else f"upstream {name!r} names no api_key_env"
    return (
        f"{said}: in keys mode no caller's key goes upstream, so upstream {name!r} gets no key "
        "and will refuse what it is sent"
    )


def _team_notes(settings: Settings) -> list[str]:
    out = []
    held = 0
    for team, config in settings.teams.items():
        unset = [e for e in config.key_envs if not os.environ.get(e)]
        held += len(config.key_envs) - len(unset)
        for env in unset:
            left = len(config.key_envs) - len(unset)
            meaning = f"one key fewer ({left} left)" if left else "no key: nobody can call as it"
            out.append(f"{env} is not set: team {team!r} has {meaning}")
    if not held:
        out.append("no team key is set: every request will be refused with 401")
    return out
