"""Making one checkpoint: what travels through the making (a Job), and the making itself.

The history before the cut is summarized as a chain of calls that each fit the summarizer's
own window, each updating the summary so far; a split turn's beginning is summarized in
parallel. After a previous checkpoint, only the messages since are summarized: as a new layer
after its layers, which stay as they were, or, once the layers outgrow their share, as an
update of all of them into one (strategies/checkpoints/chain.py: layering). The request's
allowance bounds the calls and the time; a summarizer that overflows its own window is retried
with smaller pieces; the breaker skips a summarizer that keeps failing.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass

from proxy.config.policies import PolicyConfig
from proxy.summaries.allowance import Allowance
from proxy.summaries.breaker import Breaker
from proxy.summaries.llm import (
    AllowanceSpent,
    LLMSummarizer,
    SummarizerFailed,
    SummarizerOverflow,
    Target,
)
from strategies.checkpoints.chain import Checkpoint, Room, best_checkpoint, layering, next_cut
from strategies.checkpoints.cut import (
    Cut,
    FileLists,
    SummaryText,
    chunk_capacity,
    chunks,
    merge_split,
    recent_pieces,
    summary_max_tokens,
    summary_request,
    track_files,
    turn_prefix_request,
    with_opening,
)
from strategies.messages import Message, leading_count
from strategies.rules import Running
from strategies.tokens import Counter, count_messages, count_prompt

log = logging.getLogger("contextwarden.compaction")


class NothingToSummarize(SummarizerFailed):
    """The recent turns are all there is: no cut leaves anything to summarize."""


class BreakerOpen(SummarizerFailed):
    """The summarizer kept failing: this summary is skipped (the breaker is half-open)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Context:
    """What one request's summaries need to know."""

    team: str
    counter: Counter
    policy: PolicyConfig
    target: Target
    reserve: int
    window: int  # the summarizer's own context window
    calls_per_hour: int | None = None  # the team's cap on summarizer calls
    scope: str = ""  # whose checkpoints: the team, or in passthrough the team and the caller
    pinned: frozenset[int] = frozenset()  # ids of messages kept verbatim, never summarized
    running: bool = False  # the current turn is a running task: never summarized into
    continuing: frozenset[int] = frozenset()  # its user messages that are not the task
    # Whose share of the store its checkpoints take (proxy/stores/quota.py); empty: the team's.
    owner: str = ""
    # Whether a summary may be made (not in a shadow plan without a shadow allowance: one is
    # estimated, as a dry run does, though what the plan sees is remembered).
    makes: bool = True

    def __post_init__(self) -> None:
        if not self.scope:
            object.__setattr__(self, "scope", self.team)
        if not self.owner:
            object.__setattr__(self, "owner", self.team)


@dataclass(kw_only=True, frozen=True, slots=True)
class Job:
    """One conversation's summarizing, from the request that asked for it."""

    messages: list[Message]
    chain: list[str]
    previous: Checkpoint | None  # the checkpoint a new one updates
    budget: int  # the budget the summary's cut is made for
    ctx: Context
    # The request's own budget, when the cut is made deeper than it (a sticky cut): the
    # summary is as long as the request's budget allows, whatever the cut's depth.
    request_budget: int | None = None

    @property
    def summary_budget(self) -> int:
        return self.request_budget or self.budget

    @property
    def key(self) -> str:
        """Single-flight and lock key: one summary per scope and conversation at a time."""
        return f"{self.ctx.scope}:{self.chain[1]}"

    def newer(self, candidates: list[Checkpoint]) -> Checkpoint | None:
        """Among ``candidates``, one that covers more than the previous checkpoint."""
        found = best_checkpoint(candidates, self.chain)
        floor = self.previous.covers if self.previous else 0
        return found if found is not None and found.covers > floor else None


def checkpoint_id(scope: str, chain_hash: str) -> str:
    """Unique per scope: two callers with the same conversation get two checkpoints."""
    return "ck_" + hashlib.blake2b(f"{scope}\n{chain_hash}".encode(), digest_size=10).hexdigest()


def planned_cut(job: Job) -> tuple[int, Cut] | None:
    """Where ``job``'s summary starts and cuts (strategies/checkpoints/chain.py: next_cut),
    after what its previous checkpoint covers; one rule for making and estimating."""
    ctx = job.ctx
    covered = job.previous.covers if job.previous else 0
    room = Room(job.budget, ctx.policy.summarizer.keep_recent_tokens)
    return next_cut(job.messages, covered, room, ctx.counter, Running(ctx.running, ctx.continuing))


async def make_checkpoint(
    job: Job, llm: LLMSummarizer, allowance: Allowance, breaker: Breaker
) -> Checkpoint:
    """A new checkpoint for ``job``; SummarizerFailed when none can be made."""
    ctx, messages = job.ctx, job.messages
    planned = planned_cut(job)
    if planned is None:
        raise NothingToSummarize("the recent turns are all there is")
    start, cut = planned
    if not breaker.allow():
        raise BreakerOpen("the summarizer's breaker is open: skipped once")
    previous = job.previous
    expected = summary_max_tokens(ctx.policy.summarizer.max_tokens, job.summary_budget)
    most = ctx.policy.summarizer.max_layers
    layered = layering(previous, job.summary_budget, job.budget, expected, most)
    try:
        text = await summarize(job, start, cut, llm, allowance, layered)
    except AllowanceSpent:
        raise  # a spent allowance is not the summarizer failing
    except SummarizerFailed:
        breaker.failure()
        raise
    lead = leading_count(messages)
    role = ctx.policy.summary_role
    if previous is not None and layered:
        earlier, carried, first = previous.layers(), FileLists(), start
    else:
        earlier, carried, first = (), previous.whole()[1] if previous else FileLists(), lead
    files = track_files(messages[start : cut.index], ctx.policy.file_tools(), carried)
    covers = cut.index - lead
    summary = SummaryText(text=text, files=files, role=role, later=bool(earlier))
    own = ctx.counter.message(summary.message())
    checkpoint = Checkpoint(
        id=checkpoint_id(ctx.scope, job.chain[covers]),
        conversation=job.chain[1],
        covers=covers,
        chain_hash=job.chain[covers],
        summary=text,
        tokens_before=count_messages(ctx.counter, messages[lead : cut.index]),
        tokens_after=own + (previous.tokens_after if earlier and previous else 0),
        files=files,
        created_at=time.time(),
        previous_id=previous.id if previous else None,
        earlier=earlier,
    )
    # A summary that takes more than the messages it stands for makes the request worse: the
    # cut goes without it (its ledger quotes what they established: ledger.py). A new layer
    # stands for the messages since the layers before it.
    replaced = count_messages(
        ctx.counter, [m for m in messages[first : cut.index] if id(m) not in ctx.pinned]
    )
    if own >= replaced:
        breaker.failure()
        raise SummarizerFailed(
            f"a summary of {own} tokens is no smaller than the "
            f"{replaced} tokens of messages it would replace"
        )
    if checkpoint.tokens_after > job.budget // 2:
        breaker.failure()
        raise SummarizerFailed(
            f"a summary of {checkpoint.tokens_after} tokens is too large for a {job.budget} budget"
        )
    breaker.success()
    return checkpoint


async def summarize(
    job: Job,
    start: int,
    cut: Cut,
    llm: LLMSummarizer,
    allowance: Allowance,
    layered: bool = False,
) -> str:
    """Summarize ``[start, cut)``, retrying in smaller pieces when the summarizer's own
    tokenizer counts more than ours and its window overflows; ``layered``: as a layer after
    the previous checkpoint's (else as an update of them all)."""
    ctx = job.ctx
    max_tokens = summary_max_tokens(ctx.policy.summarizer.max_tokens, job.summary_budget)
    # The prompt around the conversation, with the largest previous summary it can carry.
    overhead = count_prompt(
        ctx.counter, summary_request([], "x " * max_tokens, ctx.policy.prompts())
    )
    capacity = chunk_capacity(ctx.window, max_tokens, overhead)
    for _ in range(3):
        if capacity < 64:
            break
        try:
            return await _summarize_in(
                job, start, cut, capacity, max_tokens, llm, allowance, layered
            )
        except SummarizerOverflow:
            capacity = capacity * 6 // 10
    raise SummarizerFailed(f"a {ctx.window}-token window leaves too little room to summarize")


async def _summarize_in(
    job: Job,
    start: int,
    cut: Cut,
    capacity: int,
    max_tokens: int,
    llm: LLMSummarizer,
    allowance: Allowance,
    layered: bool,
) -> str:
    ctx, messages = job.ctx, job.messages
    cfg = ctx.policy.summarizer
    prompts = ctx.policy.prompts()
    # Pinned messages stay verbatim after the summary: they are not summarized.
    summarized = [m for m in messages[start : cut.history_end] if id(m) not in ctx.pinned]
    pieces = chunks(summarized, capacity, ctx.counter)
    extra = 0 if cut.turn_start is None else 1
    affordable = await allowance.affordable(len(pieces) + extra) - extra
    if affordable < min(1, len(pieces)):
        raise AllowanceSpent("no summarizer call is left for this request or team")
    if affordable < len(pieces):
        log.info("summarizing the last %d of %d pieces", affordable, len(pieces))
    kept = recent_pieces(pieces, affordable)
    if job.previous is None:  # else what went before is the previous summary's
        kept = with_opening(kept, pieces[: len(pieces) - len(kept)], capacity, ctx.counter)
    pieces = kept

    async def history() -> str | None:
        # The first piece reads the layers before it: as context for a new layer, or as the
        # summary it updates; the next pieces update what the first wrote.
        summary = job.previous.whole()[0] if job.previous else None
        for i, piece in enumerate(pieces):
            layer = layered and i == 0
            request = summary_request(piece, summary, prompts, capacity * 2, layer)
            timeout = await allowance.take(cfg.timeout)
            summary = await llm.complete(request, ctx.target, max_tokens, timeout)
        return summary

    if cut.turn_start is None:
        text = await history()
        if text is None:
            raise SummarizerFailed("nothing to summarize")
        return text
    request = turn_prefix_request(messages[cut.turn_start : cut.index], prompts, capacity * 2)
    timeout = await allowance.take(cfg.timeout)
    prefix = llm.complete(request, ctx.target, max(64, max_tokens // 2), timeout)
    summary, turn = await asyncio.gather(history(), prefix)
    return merge_split(summary, turn)
