"""Checkpoints to and from JSON, one format for every backend."""

from __future__ import annotations

from typing import Any

import orjson

from strategies.checkpoints.chain import Checkpoint, Layer
from strategies.checkpoints.cut import FileLists


def dump(c: Checkpoint) -> bytes:
    return orjson.dumps(
        {
            "id": c.id,
            "conversation": c.conversation,
            "covers": c.covers,
            "chain_hash": c.chain_hash,
            "summary": c.summary,
            "tokens_before": c.tokens_before,
            "tokens_after": c.tokens_after,
            "read": list(c.files.read),
            "modified": list(c.files.modified),
            "created_at": c.created_at,
            "previous_id": c.previous_id,
            "earlier": [
                [e.covers, e.summary, list(e.files.read), list(e.files.modified)] for e in c.earlier
            ],
        }
    )


def load(raw: bytes | str) -> Checkpoint:
    d: dict[str, Any] = orjson.loads(raw)
    return Checkpoint(
        id=d["id"],
        conversation=d["conversation"],
        covers=int(d["covers"]),
        chain_hash=d["chain_hash"],
        summary=d["summary"],
        tokens_before=int(d["tokens_before"]),
        tokens_after=int(d["tokens_after"]),
        files=FileLists(tuple(d.get("read", ())), tuple(d.get("modified", ()))),
        created_at=float(d.get("created_at", 0.0)),
        previous_id=d.get("previous_id"),
        earlier=tuple(
            Layer(int(covers), summary, FileLists(tuple(read), tuple(modified)))
            for covers, summary, read, modified in d.get("earlier", ())
        ),
    )
