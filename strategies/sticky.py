"""Sticky cuts: a conversation's cut, replayed on its next request, so that the next request only
appends to what the previous one forwarded.

A :class:`Recipe` records how a trimmed request's forwarded messages were made from the messages
the client sent: each forwarded message is either one of the client's (by index) or a
replacement (a summary, a cleared tool output, a trimmed text, a merged system prompt), kept
byte for byte. The next request of the conversation starts with the same messages and adds
some. Replaying the recipe on it gives the previous forwarded prompt followed by the new
messages as sent: the provider's cached prefix is kept, a summary stays the one it was, a
dropped document stays dropped, a cleared output stays cleared with the same bytes. When the
replay no longer fits, the caller cuts afresh and records the new cut.

Whose messages are "the same" is the caller's ``digest`` (the proxy's ignores where the client
moved its cache breakpoints). Pure: no I/O; the proxy keeps recipes (proxy/request/sticky_cuts.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from strategies.messages import Message

Digest = Callable[[Message], bytes]


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    count: int  # the client's messages the cut was made from
    digest: bytes  # their rolling digest
    parts: tuple[int | Message, ...]  # each forwarded message: a client index, or a replacement
    actions: tuple[str, ...]  # what the cut did, reported again when it is replayed
    budget: int  # the budget it was cut for: a larger one cuts afresh (less may go)
    checkpoint: str | None = None  # the summary checkpoint the cut used, if any


def rolling(messages: Sequence[Message], digest: Digest) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for m in messages:
        h.update(digest(m))
    return h.digest()


def record(
    sent: Sequence[Message],
    forwarded: Sequence[Message],
    actions: Sequence[str],
    budget: int,
    digest: Digest,
) -> Recipe:
    """How ``forwarded`` was made from ``sent`` (by ``actions``, for ``budget``): messages that
    are ``sent``'s own objects are recorded by index, every other one whole. The recipe names
    no checkpoint: a caller whose cut used one gives it (``dataclasses.replace``)."""
    index = {id(m): i for i, m in enumerate(sent)}
    parts = tuple(index.get(id(m), m) for m in forwarded)
    return Recipe(
        count=len(sent),
        digest=rolling(sent, digest),
        parts=parts,
        actions=tuple(actions),
        budget=budget,
    )


def replay(recipe: Recipe, sent: Sequence[Message], digest: Digest) -> list[Message] | None:
    """The recipe's prompt followed by ``sent``'s new messages, or None when ``sent`` does not
    begin with the messages the recipe was made from."""
    if len(sent) < recipe.count or rolling(sent[: recipe.count], digest) != recipe.digest:
        return None
    made = [sent[p] if isinstance(p, int) else p for p in recipe.parts]
    return [*made, *sent[recipe.count :]]


def encode(recipe: Recipe) -> bytes:
    return orjson.dumps(
        {
            "n": recipe.count,
            "d": recipe.digest.hex(),
            "p": recipe.parts,
            "a": recipe.actions,
            "b": recipe.budget,
            "c": recipe.checkpoint,
        }
    )


def decode(raw: bytes) -> Recipe | None:
    """The recipe ``raw`` holds; None for anything malformed (a store's stale or foreign blob)."""
    try:
        data = orjson.loads(raw)
        parts = tuple(data["p"])
        count = data["n"]
        valid = _whole(count) and all(
            (_whole(p) and 0 <= p < count) or isinstance(p, dict) for p in parts
        )
        actions = tuple(str(a) for a in data["a"])
        checkpoint, budget = data.get("c"), data["b"]
        if not valid or not _whole(budget):
            return None
        if not (checkpoint is None or isinstance(checkpoint, str)):
            return None
        return Recipe(
            count=count,
            digest=bytes.fromhex(data["d"]),
            parts=parts,
            actions=actions,
            budget=budget,
            checkpoint=checkpoint,
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _whole(value: object) -> bool:
    """An int, and not a bool (JSON's true is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool)
