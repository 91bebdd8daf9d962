"""One structured JSON line per chat request, on the ``contextwarden.access`` logger.

Never a key or an Authorization header; message content only with ``log_content: true``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from proxy.metrics import Outcome

log = logging.getLogger("contextwarden.access")


def log_request(outcome: Outcome, content: list[Any] | None = None) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    record: dict[str, Any] = {
        "ts": round(time.time(), 3),
        "team": outcome.team,
        "model": outcome.model,
        "format": outcome.format,
        "policy": outcome.policy,
        "status": outcome.status,
        "stream": outcome.stream,
        "tokens_before": outcome.tokens_before,
        "tokens_after": outcome.tokens_after,
        "actions": outcome.actions,
        "retries": outcome.retries,
        "checkpoint": outcome.checkpoint,
        "prefix": outcome.prefix,
        "overhead_ms": round(outcome.overhead * 1000, 3),
        "upstream_ms": round(outcome.upstream * 1000, 3),
    }
    if content is not None:
        record["messages"] = content
    log.info(orjson.dumps(record).decode())
