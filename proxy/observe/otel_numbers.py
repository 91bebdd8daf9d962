"""The numeric ``OTEL_*`` variables the SDK would read for what the proxy builds (batching, the
metric interval, export timeouts), checked first and handed to it as arguments: a value that is
not a positive number is said in one line naming it and the default used instead, where the SDK
would print a traceback into the log (or a warning that names no variable).

No OpenTelemetry import: proxy/observe/otel.py reads them before the SDK is loaded.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("contextwarden")

BSP_SCHEDULE_DELAY = "OTEL_BSP_SCHEDULE_DELAY"
BSP_EXPORT_TIMEOUT = "OTEL_BSP_EXPORT_TIMEOUT"
BSP_MAX_QUEUE_SIZE = "OTEL_BSP_MAX_QUEUE_SIZE"
BSP_MAX_EXPORT_BATCH_SIZE = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
METRIC_EXPORT_INTERVAL = "OTEL_METRIC_EXPORT_INTERVAL"
METRIC_EXPORT_TIMEOUT = "OTEL_METRIC_EXPORT_TIMEOUT"
OTLP_TIMEOUT = "OTEL_EXPORTER_OTLP_TIMEOUT"
OTLP_TRACES_TIMEOUT = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
OTLP_METRICS_TIMEOUT = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"


@dataclass(kw_only=True, frozen=True, slots=True)
class Numeric:
    """One variable: its default (the SDK's), and whether it must be a whole number."""

    name: str
    default: float
    whole: bool
    unit: str


# The SDK's defaults (opentelemetry-sdk 1.x, the exporter's 10 s).
VARIABLES = (
    Numeric(name=BSP_SCHEDULE_DELAY, default=5000, whole=True, unit="ms"),
    Numeric(name=BSP_EXPORT_TIMEOUT, default=30000, whole=True, unit="ms"),
    Numeric(name=BSP_MAX_QUEUE_SIZE, default=2048, whole=True, unit="spans"),
    Numeric(name=BSP_MAX_EXPORT_BATCH_SIZE, default=512, whole=True, unit="spans"),
    Numeric(name=METRIC_EXPORT_INTERVAL, default=60000, whole=False, unit="ms"),
    Numeric(name=METRIC_EXPORT_TIMEOUT, default=30000, whole=False, unit="ms"),
    Numeric(name=OTLP_TIMEOUT, default=10, whole=False, unit="s"),
)
# A signal's own timeout, else the one for both.
SIGNAL_TIMEOUTS = ((OTLP_TRACES_TIMEOUT, OTLP_TIMEOUT), (OTLP_METRICS_TIMEOUT, OTLP_TIMEOUT))


def checked(env: Mapping[str, str]) -> dict[str, float]:
    """Every variable's value to hand the SDK: the one set when it is a positive number (whole
    where the SDK wants an integer), else the default, said once."""
    out = {v.name: _value(env, v.name, v.default, v.whole, v.unit) for v in VARIABLES}
    for name, fallback in SIGNAL_TIMEOUTS:
        out[name] = _value(env, name, out[fallback], False, "s")
    return out


def _value(env: Mapping[str, str], name: str, default: float, whole: bool, unit: str) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = 0
    if value > 0 and math.isfinite(value):
        return value
    kind = "a positive whole number" if whole else "a positive number"
    log.warning("%s=%r is not %s: %s %s used instead", name, raw, kind, _shown(default), unit)
    return default


def _shown(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)
