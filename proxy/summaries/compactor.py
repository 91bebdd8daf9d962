"""Summary checkpoints for stateless clients: find, reuse, create, update, pre-compute.

    compact(messages)      over budget: the stored checkpoint whose view fits (no LLM call);
                           else a new one, updating the previous summary with only the
                           messages since, one at a time per conversation
    precompact(messages)   fits, but over the soft threshold: the same, in the background, so
                           the request that crosses the limit finds its checkpoint ready

A conversation seen for the first time is truncated, not summarized (it may be a one-off). A
summarizer failure or timeout, an open breaker or a store outage never fails the request:
``compact`` returns the conversation's existing checkpoint, or None and the caller truncates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from proxy.errors import Invariant
from proxy.stores.guarded import StoreFault
from proxy.stores.protocol import Store
from proxy.summaries.allowance import Allowance, TeamQuota
from proxy.summaries.breaker import Breaker, Breakers
from proxy.summaries.decision import (
    Choice,
    choose,
    first_sight_truncates,
    on_compact,
    soft_limit,
    worth_preparing,
)
from proxy.summaries.handoff import make_handoff
from proxy.summaries.job import (
    BreakerOpen,
    Context,
    Job,
    NothingToSummarize,
    make_checkpoint,
    planned_cut,
)
from proxy.summaries.llm import LLMSummarizer, SummarizerFailed
from proxy.summaries.seen import SeenConversations
from proxy.summaries.single_flight import Flights
from strategies.checkpoints.chain import Checkpoint, Room, apply_summary, next_cut, prefix_chain
from strategies.checkpoints.cut import SummaryText, summary_max_tokens
from strategies.messages import Message, leading_count
from strategies.rules import Running
from strategies.tokens import count_messages, count_prompt

log = logging.getLogger("contextwarden.compaction")

SESSION_MEMORY_CHARS = 20000
# A conversation's whole chain digests each message (its memo found by the object, else by its
# bytes): about 4 us a message, 0.1 s of a 25,000-turn body's event loop (bench/hostile.py).
CHAIN_INLINE = 1000  # messages: a longer conversation's chain is made in a worker thread


async def whole_chain(messages: list[Message]) -> list[str]:
    """``prefix_chain(messages)``, off the event loop for a long conversation."""
    if len(messages) < CHAIN_INLINE:
        return prefix_chain(messages)
    return await asyncio.to_thread(prefix_chain, messages)


@dataclass(kw_only=True, slots=True)
class Compacted:
    messages: list[Message]
    event: str  # "created", "reused", "session-memory" or (a dry run) "would-summarize"
    checkpoint_id: str | None = None
    detail: str | None = None  # a dry run: what would be summarized
    pending_tokens: int = 0  # a dry run: how much larger the real summary may be


@dataclass(kw_only=True, slots=True)
class Stats:
    created: int = 0
    reused: int = 0
    failures: int = 0
    store_errors: int = 0
    # Summaries started in the background: read only by tests/e2e/test_checkpoints.py, the one
    # outside sign that precompaction ran off the request's path.
    background: int = 0


class Compactor:
    def __init__(
        self,
        store: Store,
        llm: LLMSummarizer,
        on_latency: Callable[[float], None] | None = None,
        seen: SeenConversations | None = None,
    ) -> None:
        """``seen``: which conversations came by before (seen.py); by default this process's
        memory alone."""
        self.store = store
        self.llm = llm
        self._on_latency = on_latency
        self.stats = Stats()
        self._flights = Flights(store, self._store_fault)
        self._background: set[asyncio.Task[Any]] = set()  # summaries, and preparing them
        self._breakers = Breakers()
        self._quotas: dict[str, TeamQuota] = {}
        self._seen = seen if seen is not None else SeenConversations()

    def figures(self) -> dict[str, float]:
        """Counters for /metrics."""
        return {
            "calls": self.llm.calls,
            "failures": self.stats.failures,
            "store_errors": self.stats.store_errors,
            "breakers_open": self._breakers.open_count(),
            "store_disabled": float(bool(getattr(self.store, "disabled", None))),
        }

    async def team_figures(self) -> dict[str, dict[str, int | None]]:
        """Per team, for /admin/stats: this process's calls and its calls refused by the
        team's cap, and what is left of the cap this hour (for every replica of the store)."""
        return {
            team: {"calls": q.calls, "refused": q.refused, "left_this_hour": await q.left()}
            for team, q in list(self._quotas.items())
        }

    async def compact(
        self,
        messages: list[Message],
        budget: int,
        ctx: Context,
        session_memory: str | None = None,
        dry_run: bool = False,
        cut_budget: int | None = None,
    ) -> Compacted | None:
        """A view of ``messages`` with old history replaced by a summary, or None (truncate).

        ``cut_budget``: a deep cut's budget (smaller than ``budget``), which a new summary's cut
        is made for; a stored summary whose view fits ``budget`` is reused all the same (the
        caller fits its view deeper), so the one prepared ahead is not made again.

        ``dry_run`` (the preview) reads the store but never calls the summarizer nor writes:
        a reusable checkpoint is reported as reused, anything else as what would be
        summarized, with a placeholder where the summary would go. A context that makes no
        summary (``ctx.makes``: a shadow plan without a shadow allowance) is answered the same
        way, though what it sees is remembered, as on the request path."""
        head = prefix_chain(messages, 2)  # the conversation's key, all the store needs
        if len(head) < 2:
            return None
        if session_memory:
            return self._session_memory(messages, budget, ctx, session_memory)
        candidates = await self._candidates(ctx.scope, head[1])
        bare = Job(
            messages=messages,
            chain=head,
            previous=None,
            budget=cut_budget or budget,
            ctx=ctx,
            request_budget=budget,
        )
        if not candidates and not self._flights.running(bare.key) and planned_cut(bare) is None:
            # Nothing stored to reuse and nothing to summarize (a running task's steps):
            # truncated, without digesting the whole conversation. Seen, as on_compact has it.
            await self._seen.check(bare.key, not dry_run, ctx.owner)
            return None
        chain = await whole_chain(messages)
        choice = self._choice(candidates, messages, chain, budget, ctx)
        job = Job(
            messages=messages,
            chain=chain,
            previous=choice.best,
            budget=cut_budget or budget,
            ctx=ctx,
            request_budget=budget,
        )
        # Asked only when it matters (on_compact): it remembers the conversation.
        seen = True
        if choice.best is None:
            seen = await self._seen.check(job.key, not dry_run, ctx.owner)
        action = on_compact(choice, lambda: seen, ctx.policy)
        if action in ("reuse", "reuse-and-refresh"):
            if choice.view is None or choice.best is None:
                raise Invariant("a checkpoint reused without its view or its best match")
            if not dry_run:
                self.stats.reused += 1
                if action == "reuse-and-refresh" and ctx.makes:
                    self._spawn(job)  # update it ahead of time
            return Compacted(messages=choice.view, event="reused", checkpoint_id=choice.best.id)
        if action == "truncate":
            return None  # maybe a one-off: if it comes back, it is summarized then
        if dry_run or not ctx.makes:
            return self._estimate(job)
        made = None
        if self._may_make(job):
            poll = (ctx.scope, chain[1])
            made = await self._flights.run(
                job.key, lambda: self._make(job), True, job.newer, poll, _ttl(ctx)
            )
        kept = made or choice.best  # no newer summary: the one it has keeps its prefix stable
        if kept is None:
            return None
        view = apply_summary(messages, kept.covers, kept.texts(ctx.policy.summary_role), ctx.pinned)
        return Compacted(
            messages=view, event="created" if made else "reused", checkpoint_id=kept.id
        )

    async def precompact(
        self, messages: list[Message], budget: int, ctx: Context, cut_budget: int | None = None
    ) -> None:
        """Start summarizing in the background when the view would be over the soft threshold.
        ``cut_budget``: the budget the summary's cut is made for (a deep cut's, smaller than
        ``budget``, whose soft threshold says when)."""
        # The conversation's key first (its leading messages and first one): a conversation
        # seen for the first time, or one summarizing already, needs no more.
        head = prefix_chain(messages, 2)
        if len(head) < 2:
            return
        job = Job(
            messages=messages, chain=head, previous=None, budget=cut_budget or budget, ctx=ctx
        )
        if self._flights.running(job.key):
            return
        if first_sight_truncates(await self._seen.check(job.key, True, ctx.owner), ctx.policy):
            return  # prepared from its next request on, if there is one
        if not ctx.makes:  # seen all the same: its next request is planned as it would be
            return
        if planned_cut(job) is None:
            # Nothing to summarize from the start, nor then after any checkpoint (a later
            # start cuts no sooner): a running task's steps, or recent turns only.
            return
        chain = await whole_chain(messages)
        candidates = await self._candidates(ctx.scope, chain[1])
        choice = self._choice(candidates, messages, chain, budget, ctx)
        soft = soft_limit(budget, ctx.policy)
        if worth_preparing(choice, lambda: count_prompt(ctx.counter, messages) > soft):
            self._spawn(
                Job(
                    messages=messages,
                    chain=chain,
                    previous=choice.best,
                    budget=cut_budget or budget,
                    ctx=ctx,
                    request_budget=budget,
                )
            )

    async def handoff(self, messages: list[Message], ctx: Context) -> Checkpoint | None:
        """A summary of all of ``messages`` after their leading instructions (a client's own
        compaction, answered by the proxy: proxy/summaries/handoff.py), kept as the
        conversation's checkpoint; None when the summarizer could not make one."""
        return await self._kept(ctx, partial(make_handoff, messages, ctx, self.llm))

    def soon(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (preparing a summary: its request's answer does not wait for it) in
        the background, where ``drain`` waits for it too."""

        async def guarded() -> None:
            try:
                await work
            except Exception:  # fault boundary: a background task, logged; prepared again later
                log.exception("preparing a summary failed")

        task = asyncio.create_task(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background summaries (shutdown and tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def _candidates(self, scope: str, conversation: str) -> list[Checkpoint]:
        try:
            return await self.store.candidates(scope, conversation)
        except StoreFault as exc:  # a store outage degrades to "no checkpoint"
            self._store_fault(exc)
            return []

    def _choice(
        self,
        candidates: list[Checkpoint],
        messages: list[Message],
        chain: list[str],
        budget: int,
        ctx: Context,
    ) -> Choice:
        role = ctx.policy.summary_role
        return choose(
            candidates,
            chain,
            messages,
            budget,
            soft_limit(budget, ctx.policy),
            ctx.counter,
            role,
            ctx.pinned,
        )

    def _may_make(self, job: Job) -> bool:
        """Whether a flight for ``job`` can make anything: one is under way for its
        conversation (its summary may serve this request), or its messages leave something to
        summarize. A running task's steps are never summarized, so an agent's single long task
        cuts afresh many times with nothing to summarize: no lock is taken for it (two store
        round trips on the request's path, a worker thread's each for SQLite)."""
        return self._flights.running(job.key) or planned_cut(job) is not None

    def _spawn(self, job: Job) -> None:
        if self._flights.running(job.key) or planned_cut(job) is None:
            return
        self.stats.background += 1
        poll = (job.ctx.scope, job.chain[1])
        work = self._flights.run(
            job.key, lambda: self._make(job), False, job.newer, poll, _ttl(job.ctx)
        )
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _make(self, job: Job) -> Checkpoint | None:
        return await self._kept(job.ctx, partial(make_checkpoint, job, self.llm))

    async def _kept(
        self, ctx: Context, making: Callable[[Allowance, Breaker], Awaitable[Checkpoint]]
    ) -> Checkpoint | None:
        """A checkpoint made (``making``, within the request's allowance, behind the
        summarizer's breaker) and kept in the store; None when none could be made."""
        breaker = self._breakers.for_target(
            ctx.team, ctx.target.key, ctx.policy.summarizer.breaker_failures
        )
        began = time.monotonic()
        try:
            checkpoint = await making(self._allowance(ctx), breaker)
        except NothingToSummarize:
            return None
        except BreakerOpen:
            return None
        except SummarizerFailed as exc:
            self.stats.failures += 1
            log.warning("summarization failed, truncating instead: %s", exc)
            return None
        if self._on_latency is not None:
            self._on_latency(time.monotonic() - began)
        try:
            await self.store.put(ctx.scope, checkpoint, ctx.owner)
        except StoreFault as exc:  # used for this request all the same
            self._store_fault(exc)
        self.stats.created += 1
        return checkpoint

    def _allowance(self, ctx: Context) -> Allowance:
        quota = self._quotas.get(ctx.team)
        if quota is None or quota.per_hour != ctx.calls_per_hour:
            quota = self._quotas[ctx.team] = TeamQuota(
                team=ctx.team, per_hour=ctx.calls_per_hour, store=self.store
            )
        cfg = ctx.policy.summarizer
        return Allowance.start(cfg.max_calls_per_request, cfg.deadline_seconds, quota)

    def _estimate(self, job: Job) -> Compacted | None:
        """What ``_make`` would summarize, without summarizing: the same cut, a placeholder."""
        ctx, messages = job.ctx, job.messages
        planned = planned_cut(job)
        if planned is None:
            return None
        start, cut = planned
        count = cut.index - start
        tokens = count_messages(ctx.counter, messages[start : cut.index])
        detail = f"{count} messages (about {tokens} tokens)"
        note = f"[preview: the summary of {detail} would be written here]"
        placeholder = SummaryText(text=note, role=ctx.policy.summary_role)
        expected = summary_max_tokens(ctx.policy.summarizer.max_tokens, job.summary_budget)
        pending = max(0, expected - ctx.counter.message(placeholder.message()))
        covers = cut.index - leading_count(messages)
        view = apply_summary(messages, covers, placeholder, ctx.pinned)
        return Compacted(
            messages=view,
            event="would-summarize",
            checkpoint_id=None,
            detail=detail,
            pending_tokens=pending,
        )

    def _session_memory(
        self, messages: list[Message], budget: int, ctx: Context, seed: str
    ) -> Compacted | None:
        cfg = ctx.policy.summarizer
        room, running = Room(budget, cfg.keep_recent_tokens), Running(ctx.running, ctx.continuing)
        planned = next_cut(messages, 0, room, ctx.counter, running)
        if planned is None:
            return None
        summary = SummaryText(text=seed[:SESSION_MEMORY_CHARS], role=ctx.policy.summary_role)
        covers = planned[1].index - leading_count(messages)
        return Compacted(
            messages=apply_summary(messages, covers, summary, ctx.pinned), event="session-memory"
        )

    def _store_fault(self, exc: Exception) -> None:
        self.stats.store_errors += 1
        log.debug("checkpoint store unavailable: %s", exc)


def _ttl(ctx: Context) -> float:
    return ctx.policy.summarizer.timeout
