"""What an upstream was learned to serve, beyond its config: whether it implements Responses
compaction (Codex's ``compaction_trigger``; proxy/request/compaction.py). Declared per
upstream (``responses_compaction``), or learned, and kept in the store.

Learned only from the upstream's explicit "not supported" answer (``unsupported``): a 404,
405 or 501 (not a model the upstream does not know), or a 400 whose own words (never text the
request carried: proxy/upstreams/overflows.py ``Echo``) say compaction, or the endpoint, is
not supported or implemented. A 400 about an unknown field or a bad value, a 500, an ordinary
turn: the caller's request may have caused them, so they teach nothing. And what is learned is
the learning caller's (``learns_as``: its team in keys mode, its credential in passthrough),
never another's: one caller's malformed compaction cannot switch every team's compactions to
the proxy's summaries. ``GET /admin/learned-capabilities`` lists it, ``DELETE
/admin/learned-capabilities/{scope}/{upstream}`` forgets it, as does ``contextwarden
capabilities forget`` without a running proxy.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson

from proxy.config.catalog import Upstream
from proxy.stores.guarded import StoreFault
from proxy.stores.protocol import Store
from proxy.upstreams.overflows import Echo

log = logging.getLogger("contextwarden.compaction")

# Store setting: the proxy answers this scope's compactions on this upstream. The key is
# ``SERVED_KEY + scope + "\t" + upstream``; one without a scope (learned for every caller, by
# an older version) is ignored.
SERVED_KEY = "compaction-served\t"

UNSUPPORTED_STATUSES = frozenset({404, 405, 501})
# Codes that name the request's fault, whatever the message says.
REQUEST_FAULTS = frozenset(
    {
        "unknown_parameter",
        "unsupported_parameter",
        "invalid_type",
        "invalid_value",
        "unsupported_value",
        "model_not_found",
    }
)
_SUBJECT = re.compile(r"\b(?:compaction(?:_trigger)?|compactions|endpoint|route)\b", re.IGNORECASE)
_VERDICT = re.compile(
    r"\b(?:not (?:yet )?(?:supported|implemented)|unsupported|does not support|"
    r"doesn't support|not available)\b",
    re.IGNORECASE,
)
_NO_MODEL = re.compile(r"\bmodel\b.*\b(?:not found|does not exist|not exist)\b", re.IGNORECASE)


def unsupported(status: int, body: bytes, sent: bytes | None) -> bool:
    """Whether an answer to a compaction request is the upstream's explicit "not supported"
    (``sent``: the request as forwarded, whose echoes are not the upstream's words)."""
    if status not in UNSUPPORTED_STATUSES and status != 400:
        return False
    message, code = _error(body)
    if code in REQUEST_FAULTS:
        return False
    echo = Echo(sent) if sent is not None else None
    own = echo.own_text(message) if echo is not None else message
    if status in UNSUPPORTED_STATUSES:
        return not _NO_MODEL.search(own)  # a model it does not know is no missing endpoint
    subject, verdict = _SUBJECT.search(own), _VERDICT.search(own)
    if subject is None or verdict is None:
        return False
    # The words from the subject to the verdict: the client's own when they stand in the request.
    span = own[min(subject.start(), verdict.start()) : max(subject.end(), verdict.end())]
    return echo is None or not echo.stands_in(span)


def _error(body: bytes) -> tuple[str, str | None]:
    """An error answer's message and code, in any provider's shape (the body itself when it
    is no JSON)."""
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:4096].decode("utf-8", "replace"), None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, str):
        return error, None
    if not isinstance(error, dict):
        error = data if isinstance(data, dict) else {}
    message = error.get("message") or error.get("detail") or ""
    code = error.get("code") or error.get("type")
    return str(message), code if isinstance(code, str) else None


class CompactionSupport:
    """The (scope, upstream) pairs whose compactions the proxy answers, as learned: a cache of
    the store's settings, read once."""

    def __init__(self) -> None:
        self._served: set[tuple[str, str]] = set()
        self._loaded = False

    async def served(self, scope: str, name: str, upstream: Upstream, store: Store) -> bool:
        if upstream.responses_compaction != "auto":
            return upstream.responses_compaction == "proxy"
        await self._load(store)
        return (scope, name) in self._served

    async def _load(self, store: Store) -> None:
        """The store's settings, read once (a failed read is tried again at the next use)."""
        if self._loaded:
            return
        try:
            stored = await store.learned_windows()
        except StoreFault as exc:  # asked again at the next compaction
            log.warning("could not read which upstreams compact: %s", exc)
            return
        self._served |= set(served_in(stored))
        self._loaded = True

    async def learn(self, scope: str, name: str, store: Store) -> None:
        self._served.add((scope, name))
        try:
            await store.put_setting(served_key(scope, name), 1)
        except StoreFault as exc:  # kept in memory all the same
            log.warning("could not persist that %s does not compact: %s", name, exc)

    async def items(self, store: Store) -> dict[str, list[str]]:
        """Per scope, the upstreams whose compactions the proxy answers, as learned."""
        await self._load(store)
        out: dict[str, list[str]] = {}
        for scope, name in sorted(self._served):
            out.setdefault(scope, []).append(name)
        return out

    async def forget(self, scope: str, name: str, store: Store) -> bool:
        """An operator's reset: the next compaction of ``scope`` on ``name`` is forwarded
        again; whether it was learned."""
        had = (scope, name) in self._served
        self._served.discard((scope, name))
        await store.forget_learned([served_key(scope, name)])
        return had


def served_key(scope: str, name: str) -> str:
    return f"{SERVED_KEY}{scope}\t{name}"


def served_in(stored: dict[str, int]) -> list[tuple[str, str]]:
    """The (scope, upstream) pairs the store's settings say the proxy answers compactions of."""
    out = []
    for key in stored:
        if key.startswith(SERVED_KEY):
            scope, sep, name = key.removeprefix(SERVED_KEY).rpartition("\t")
            if sep and scope:
                out.append((scope, name))
    return out
