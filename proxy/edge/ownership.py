"""Stored Responses belong to the team that made them.

In ``keys`` mode every team reaches the upstream with the operator's one key, so the upstream
cannot tell teams apart: a response id one team got back would continue, and show, that
conversation to any other team that names it in ``previous_response_id`` or ``conversation``.
The proxy remembers, in its store (shared by replicas, 30 days), which team each response id it
relayed was answered to, and refuses another team's. An id the proxy never relayed (made before
it was deployed, or forgotten) is not refused: nothing says whose it is.

And a team with ``max_context_tokens`` may not send a stateful request at all: the history the
server holds is out of the proxy's sight, so the cap could not be kept.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from proxy.edge.errors import Forbidden
from proxy.stores import GuardedStore

log = logging.getLogger("contextwarden")
TTL = 30 * 24 * 3600.0
PREFIX = "owner\t"
_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]{1,200})"')
STATEFUL_KEYS = ("previous_response_id", "conversation")


def referenced(payload: dict[str, Any]) -> list[str]:
    """The stored-object ids a Responses request continues."""
    out = []
    for key in STATEFUL_KEYS:
        value = payload.get(key)
        if isinstance(value, dict):  # conversation: {"id": ...}
            value = value.get("id")
        if isinstance(value, str) and value:
            out.append(value)
    return out


def answered_id(head: bytes) -> str | None:
    """The response id in an answer's first bytes (its JSON, or a stream's response.created)."""
    found = _ID.search(head[:65536])
    return found.group(1).decode() if found else None


class Owners:
    def __init__(self, store: GuardedStore) -> None:
        self._store = store

    async def check(self, team: str, capped: bool, payload: dict[str, Any]) -> None:
        ids = referenced(payload)
        if not ids:
            return
        if capped:
            raise Forbidden(
                f"team {team!r} has max_context_tokens, which a stateful request "
                "(previous_response_id or conversation) would bypass: the server's history is "
                "out of the proxy's sight; send the conversation in input instead",
                code="stateful_not_allowed",
            )
        for object_id in ids:
            owner = await self._owner(object_id)
            if owner is not None and owner != team:
                raise Forbidden(
                    f"{object_id} was not made by team {team!r}", code="not_your_object"
                )

    async def claim(self, team: str, object_id: str) -> None:
        try:
            await self._store.put_blob(PREFIX + object_id, team.encode(), TTL)
        except Exception as exc:  # the answer is relayed all the same
            log.warning("could not record the owner of %s: %s", object_id, exc)

    async def _owner(self, object_id: str) -> str | None:
        try:
            found = await self._store.get_blob(PREFIX + object_id)
        except Exception as exc:
            log.warning("could not read the owner of %s: %s", object_id, exc)
            return None
        return found.decode() if found is not None else None
