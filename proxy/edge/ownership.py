"""Stored objects belong to the team that made them.

In ``keys`` mode every team reaches the upstream with the operator's one key, so the upstream
cannot tell teams apart: an id one team got back (a stored response, its output items, a
conversation, a stored chat completion) would continue, and show, that team's work to any other
team that names it. The proxy remembers, in its store (shared by replicas, 30 days), which team
each object id it relayed was answered to (``claim``: every ``"id"`` of a stored object in an
answer, streamed or whole), and refuses another team's wherever a request names one
(``check``):

- a Responses body's ``previous_response_id``, ``conversation`` and ``item_reference`` items
  (``type`` may be left out, as the API allows), on ``/v1/responses`` and on a forwarded
  ``/v1/responses/input_tokens``;
- a forwarded path's segments (``/v1/responses/{id}/input_items``, ``/v1/conversations/{id}``,
  ``/v1/chat/completions/{id}``, where the operator forwards them).

An id is checked as the very string the upstream receives, and only an id in the one form
providers make them (letters, digits, ``_`` and ``-``: the form an answer's ids are claimed in)
is taken: ``" msg_..."`` was looked up as itself, found no owner, and went to an upstream that
may read it as ``msg_...`` (#55, F10). Any other id in these fields, or a path segment holding
an id beside white space, is refused with 400 ``invalid_id``.

An id the proxy never relayed (made before it was deployed, or forgotten) is not refused:
nothing says whose it is.

And a team with ``max_context_tokens`` may not send a stateful request at all (one that names
server-held history or items): that history is out of the proxy's sight, so the cap could not
be kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from proxy.errors import BadRequest, Forbidden
from proxy.stores import GuardedStore, StoreFault

log = logging.getLogger("contextwarden")
TTL = 30 * 24 * 3600.0
PREFIX = "owner\t"
# An object id as providers make them: a short prefix, "_" or "-", then the id proper
# (resp_..., msg_..., rs_..., fc_..., conv_..., chatcmpl-...).
_OBJECT = rb"[A-Za-z]{2,12}[_-][A-Za-z0-9_-]{6,200}"
_ID = re.compile(rb'"id"\s*:\s*"(' + _OBJECT + rb')"')
_SEGMENT = re.compile(_OBJECT.decode())
# What a stated id may be made of: nothing an upstream could trim, fold or decode away.
_EXACT = re.compile(r"[A-Za-z0-9_-]{1,256}")
STATEFUL_KEYS = ("previous_response_id", "conversation")
CARRY = 256  # bytes of one chunk kept for the next, so an id split between them is read


def referenced(payload: dict[str, Any]) -> list[str]:
    """The stored-object ids a Responses request continues or pulls in; BadRequest for one
    that is not in the exact form of an id."""
    found: list[tuple[str, Any]] = []
    for key in STATEFUL_KEYS:
        value = payload.get(key)
        if isinstance(value, dict):  # conversation: {"id": ...}
            found.append((f"{key}.id", value.get("id")))
        else:
            found.append((key, value))
    items = payload.get("input")
    if isinstance(items, list):
        found += [
            (f"input[{i}].id", item["id"]) for i, item in enumerate(items) if is_reference(item)
        ]
    return [exact(param, value) for param, value in found if value not in (None, "")]


def is_reference(item: Any) -> bool:
    """Whether an input item names a stored item: ``item_reference``, whose ``type`` the API
    lets a client leave out (or send as null), so an item of no type and no role is one too."""
    if not isinstance(item, dict) or "id" not in item:
        return False
    kind = item.get("type")
    return kind == "item_reference" or (kind is None and "role" not in item)


def exact(param: str, value: Any) -> str:
    """``value``, an id in the exact form ids take; BadRequest otherwise."""
    if isinstance(value, str) and _EXACT.fullmatch(value):
        return value
    raise BadRequest(
        f"{param} is not an object id as the API gave it (letters, digits, '_' and '-' only; "
        f"got {str(value)[:80]!r}): send the id exactly",
        param=param,
        code="invalid_id",
    )


def named_in_path(subpath: str) -> list[str]:
    """The segments of a forwarded path that look like object ids; BadRequest for a segment
    holding one beside white space (``/v1/responses/%20resp_...``), which an upstream may
    trim to the id."""
    segments = subpath.split("/")
    for segment in segments:
        if segment != segment.strip() and _SEGMENT.fullmatch(segment.strip()):
            exact("the request path", segment)
    return [s for s in segments if _SEGMENT.fullmatch(s)]


def answered_id(head: bytes) -> str | None:
    """The response id in an answer's first bytes (its JSON, or a stream's response.created)."""
    found = next((i for i in answered_ids(head[:65536]) if i.startswith("resp_")), None)
    return found


def answered_ids(data: bytes) -> set[str]:
    """Every object id an answer (or a piece of a stream) states."""
    return {m.group(1).decode() for m in _ID.finditer(data)}


async def claiming(
    stream: AsyncIterator[bytes], claim: Callable[[set[str]], Awaitable[None]]
) -> AsyncIterator[bytes]:
    """``stream`` relayed chunk by chunk, unchanged; each object id its events state (the
    output items of a Responses stream) is claimed before the chunk that states it goes on,
    so the client never holds an id that is not yet its team's."""
    seen: set[str] = set()
    carry = b""
    async for chunk in stream:
        new = answered_ids(carry + chunk) - seen
        if new:
            await claim(new)
            seen |= new
        # The tail of everything read so far, not of this chunk alone: an id may span a
        # chunk shorter than itself (aiohttp relays what arrived, however little).
        carry = (carry + chunk)[-CARRY:]
        yield chunk


class Owners:
    def __init__(self, store: GuardedStore) -> None:
        self._store = store

    async def check(
        self, team: str, capped: bool, payload: dict[str, Any], named: Iterable[str] = ()
    ) -> None:
        """403 when the request names another team's object, or is stateful from a team with
        a context cap."""
        ids = referenced(payload)
        if ids and capped:
            raise Forbidden(
                f"team {team!r} has max_context_tokens, which a stateful request "
                "(previous_response_id, conversation or item_reference) would bypass: the "
                "server's history is out of the proxy's sight; send the conversation in input "
                "instead",
                code="stateful_not_allowed",
            )
        for object_id in [*ids, *named]:
            owner = await self._owner(object_id)
            if owner is not None and owner != team:
                raise Forbidden(
                    f"{object_id} was not made by team {team!r}", code="not_your_object"
                )

    async def claim(self, team: str, ids: Iterable[str]) -> None:
        """Record ``team`` as the owner of each id that has none yet (an answer that lists
        another team's ids, such as a listing of old items, never takes them over)."""
        for object_id in ids:
            try:
                if await self._store.get_blob(PREFIX + object_id) is None:
                    # Outside the store's bounds (proxy/stores/quota.py): evicted, it would
                    # make the object anybody's.
                    await self._store.put_blob(PREFIX + object_id, team.encode(), TTL, None)
            except StoreFault as exc:  # the answer is relayed all the same
                log.warning("could not record the owner of %s: %s", object_id, exc)
                return

    async def _owner(self, object_id: str) -> str | None:
        try:
            found = await self._store.get_blob(PREFIX + object_id)
        except StoreFault as exc:  # the store is down: the object is taken for anybody's
            log.warning("could not read the owner of %s: %s", object_id, exc)
            return None
        return found.decode() if found is not None else None
