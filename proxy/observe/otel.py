"""Whether OpenTelemetry is on, and how: the standard ``OTEL_*`` variables, read once at start-up.

Off unless they ask for an exporter: ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` (``otlp``,
``console``, ``none``), or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` for both signals,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT`` for one), which means ``otlp``
for the signals it covers. ``OTEL_SDK_DISABLED=true`` turns everything off. OTLP goes over
HTTP/protobuf (the exporter the ``otel`` extra installs); the SDK itself reads the rest
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, headers, timeouts, the sampler, batching).

The SDK is an optional extra (``pip install 'contextwarden[otel]'``): without it, or with nothing
asked, no OpenTelemetry module is imported and the request path checks one attribute
(``Runtime.telemetry is None``: proxy/edge/traced.py, proxy/edge/exchange.py) and builds
nothing.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.observe.otel_numbers import checked

if TYPE_CHECKING:
    from proxy.observe.tracing import Telemetry

log = logging.getLogger("contextwarden")
EXPORTERS = ("otlp", "console")
PROTOCOL = "http/protobuf"


@dataclass(frozen=True, slots=True)
class Wanted:
    """The exporters asked for, per signal (empty: that signal is off)."""

    traces: tuple[str, ...]
    metrics: tuple[str, ...]


def wanted(env: Mapping[str, str]) -> Wanted | None:
    """What the variables ask for; None when they ask for nothing (the default)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    found = Wanted(exporters(env, "TRACES"), exporters(env, "METRICS"))
    return found if found.traces or found.metrics else None


def exporters(env: Mapping[str, str], signal: str) -> tuple[str, ...]:
    """One signal's exporters: those ``OTEL_<signal>_EXPORTER`` names, else ``otlp`` when an
    OTLP endpoint covers the signal; an unknown name, or OTLP over another protocol than
    HTTP/protobuf, is logged and left out."""
    named = env.get(f"OTEL_{signal}_EXPORTER")
    if named is None:
        endpoint = env.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
        endpoint = endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        names: tuple[str, ...] = ("otlp",) if endpoint else ()
    else:
        names = tuple(n.strip().lower() for n in named.split(",") if n.strip())
    if "none" in names:
        return ()
    for name in names:
        if name not in EXPORTERS:
            log.warning("OTEL_%s_EXPORTER=%s: not one of %s; left out", signal, name, EXPORTERS)
    protocol = env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", PROTOCOL
    )
    if "otlp" in names and protocol.strip() != PROTOCOL:
        log.warning(
            "OTLP %s export over %r is not supported (only %s): not exported",
            signal.lower(),
            protocol,
            PROTOCOL,
        )
        names = tuple(n for n in names if n != "otlp")
    return tuple(n for n in names if n in EXPORTERS)


def start(env: Mapping[str, str] = os.environ) -> Telemetry | None:
    """The process's telemetry, as the variables ask; None when off or when the SDK (the
    ``otel`` extra) is not installed (said once in the log)."""
    asked = wanted(env)
    if asked is None:
        return None
    modules = ["opentelemetry.sdk"]
    if "otlp" in asked.traces + asked.metrics:
        modules.append("opentelemetry.exporter.otlp.proto.http")
    if not all(_installed(m) for m in modules):
        log.warning(
            "the OTEL_* variables ask for OpenTelemetry export, but its SDK is not installed "
            "(pip install 'contextwarden[otel]'): running without it"
        )
        return None
    from proxy.observe.tracing import build

    try:
        telemetry = build(asked.traces, asked.metrics, numbers=checked(env))
    except Exception as exc:  # a variable the SDK refuses (OTEL_BSP_*...): said, and left off
        log.error("OpenTelemetry left off: the SDK refused its OTEL_* variables: %s", exc)
        return None
    traces, metrics = ",".join(asked.traces) or "off", ",".join(asked.metrics) or "off"
    log.info("OpenTelemetry on: traces %s, metrics %s", traces, metrics)
    return telemetry


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is absent
        return False
