"""Summary checkpoints: which stored summary covers how much of a conversation, where the next
one cuts, and how its layers are laid out. Pure cut rules: whether to summarize is the proxy's
(proxy/summaries/decision.py).

A proxy sees each conversation resent whole on every call. A checkpoint is keyed by a hash chain
over the conversation's messages: ``chain[k]`` hashes the leading system messages and the first
``k`` messages after them, so a later request of the same conversation (same beginning, more
messages) recomputes the same ``chain[k]`` and finds the checkpoint, while any edit to the
summarized part changes the hash and the checkpoint is simply not used. Checkpoints of one
conversation are grouped under ``chain[1]`` so one look-up returns every candidate.

A checkpoint is layered: a later checkpoint adds a summary of the messages since the one before
it after that one's layers, which stay as they were, so the prompt a provider has cached runs
through them; the layers are merged into one only when they outgrow their share of the budget
(``layering``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from strategies.bounded_memory import DigestMemo, ObjectMemo
from strategies.checkpoints.cut import (
    Cut,
    FileLists,
    SummaryText,
    find_cut,
    keep_recent_tokens,
    merge_files,
)
from strategies.messages import Message, leading_count
from strategies.rules import NOT_RUNNING, Running, current_turn_start, running_task
from strategies.tokens import Counter


def prefix_chain(messages: Sequence[Message], length: int | None = None) -> list[str]:
    """``chain[k]`` for k = 0..n, where n counts the messages after the leading system run;
    only its first ``length`` entries when given (a conversation's key is ``chain[1]``)."""
    lead = leading_count(messages)
    h = hashlib.blake2b(digest_size=16)
    for m in messages[:lead]:
        h.update(_digest(m))
    chain = [h.hexdigest()]
    end = len(messages) if length is None else lead + length - 1
    for m in messages[lead:end]:
        h.update(_digest(m))
        chain.append(h.copy().hexdigest())
    return chain


def _digest(message: Message) -> bytes:
    known = _BY_OBJECT.get(message)
    if known is not None:
        return known
    raw = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    digest = _DIGESTS.digest(raw)
    _BY_OBJECT.remember(message, digest, len(raw))
    return digest


# A conversation's chain is made at every request near its limit, from messages its earlier
# requests sent: the same objects, where the request shares them with its conversation's last
# (proxy/formats/reused_items.py), found without writing them out (with their wire items, in
# Responses and Messages); else equal ones, found by their bytes.
_DIGESTS = DigestMemo()
_BY_OBJECT = ObjectMemo()


def memories() -> tuple[DigestMemo, ObjectMemo]:
    """The chain's memos, for the memory budget."""
    return _DIGESTS, _BY_OBJECT


@dataclass(frozen=True, slots=True)
class Layer:
    """One summary of a layered checkpoint: of the messages up to ``covers`` (after the leading
    run) since the layer before it, and the files they read and modified."""

    covers: int
    summary: str
    files: FileLists = field(default_factory=FileLists)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """A conversation's summary up to ``covers``: ``summary`` (and ``files``) are its newest
    layer's, of the messages after the ``earlier`` layers' (none: of every covered message).
    ``tokens_after`` counts every layer's message."""

    id: str
    conversation: str  # chain[1]: the group key
    covers: int  # messages after the leading run that the summary stands for
    chain_hash: str  # chain[covers]
    summary: str
    tokens_before: int
    tokens_after: int
    files: FileLists = field(default_factory=FileLists)
    created_at: float = 0.0
    previous_id: str | None = None
    earlier: tuple[Layer, ...] = ()

    def layers(self) -> tuple[Layer, ...]:
        """Every layer, oldest first."""
        return (*self.earlier, Layer(self.covers, self.summary, self.files))

    def text(self, role: str = "user") -> SummaryText:
        """The newest layer's summary (the whole summary of a checkpoint of one layer)."""
        return SummaryText(text=self.summary, files=self.files, role=role, later=bool(self.earlier))

    def texts(self, role: str = "user") -> list[tuple[int, SummaryText]]:
        """Each layer's summary, oldest first, with how many messages it covers up to."""
        return [
            (
                layer.covers,
                SummaryText(text=layer.summary, files=layer.files, role=role, later=i > 0),
            )
            for i, layer in enumerate(self.layers())
        ]

    def whole(self) -> tuple[str, FileLists]:
        """The layers as one summary and one list of files: what a merge updates."""
        layers = self.layers()
        text = "\n\n".join(layer.summary for layer in layers)
        return text, merge_files([layer.files for layer in layers])


def layering(
    previous: Checkpoint | None, budget: int, cut: int, expected: int, max_layers: int
) -> bool:
    """Whether the checkpoint after ``previous`` adds a layer (else it rewrites the summary
    as one): while there are fewer than ``max_layers`` and the layers with a new one of
    ``expected`` tokens stay within their share: a third of the request's ``budget``, and
    half of the ``cut``'s (a deep cut's, smaller), as any summary."""
    if previous is None or max_layers < 2 or len(previous.earlier) + 1 >= max_layers:
        return False
    return previous.tokens_after + expected <= min(budget // 3, cut // 2)


def best_checkpoint(candidates: Sequence[Checkpoint], chain: Sequence[str]) -> Checkpoint | None:
    """The candidate covering the most messages whose hash matches this conversation, leaving
    at least one message verbatim after the summary."""
    usable = [
        c for c in candidates if 0 < c.covers < len(chain) - 1 and chain[c.covers] == c.chain_hash
    ]
    return max(usable, key=lambda c: c.covers, default=None)


def apply_summary(
    messages: Sequence[Message],
    covers: int,
    summary: SummaryText | Sequence[tuple[int, SummaryText]],
    keep: frozenset[int] = frozenset(),
) -> list[Message]:
    """The conversation with its first ``covers`` messages (after the leading run) replaced by
    the summary, placed right after the leading system messages; the covered messages whose id
    is in ``keep`` (pinned) follow the summary verbatim, in order.

    A layered summary (``Checkpoint.texts``) puts each layer, then the pinned messages it
    covers, in order: what a new layer adds comes after everything the layers before it
    forwarded."""
    lead = leading_count(messages)
    layers = [(covers, summary)] if isinstance(summary, SummaryText) else summary
    out = list(messages[:lead])
    start = 0
    for end, text in layers:
        out.append(text.message())
        if keep:
            out += [m for m in messages[lead + start : lead + end] if id(m) in keep]
        start = end
    out += messages[lead + covers :]
    return out


@dataclass(frozen=True, slots=True)
class Room:
    """What a summary's cut is made for: the ``budget`` it must leave the conversation
    within, and the recent tokens kept verbatim (``keep``; None: the budget's default share,
    strategies/checkpoints/cut.py: keep_recent_tokens)."""

    budget: int
    keep: int | None = None


def next_cut(
    messages: Sequence[Message],
    covered: int,
    room: Room,
    counter: Counter,
    running: Running = NOT_RUNNING,
) -> tuple[int, Cut] | None:
    """Where the next summary starts (after the leading run and what ``covered`` messages a
    previous summary holds) and where it cuts, keeping the recent turns verbatim; None when
    there is nothing worth summarizing. One rule for making, estimating and session memory.

    The cut never goes past the message that states the current task: the user message
    that opened the current turn (or, with ``running.atomic``, the running agent task's
    statement; ``running.continuing``: the user messages that continue its loop).
    Every plan keeps it as the client sent it (strategies/protected.py); the steps after it
    are cleared and dropped by the engine instead."""
    lead = leading_count(messages)
    start = lead + covered
    budget = room.budget
    cut = find_cut(messages, start, keep_recent_tokens(budget, room.keep), counter, budget // 2)
    if cut is not None:
        if running.atomic:
            task = running_task(messages, lead, running.continuing)[0]
        else:
            task = current_turn_start(messages, lead)
        if cut.index > task:
            cut = Cut(task) if task > start else None
    return None if cut is None else (start, cut)
