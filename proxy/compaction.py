"""Summary checkpoints for stateless clients: find, reuse, create, update, pre-compute.

    compact(messages)      over budget: the best stored checkpoint if its view fits (no LLM
                           call); else a new checkpoint, updating the previous summary with only
                           the messages since, single-flight per conversation
    precompact(messages)   fits, but over the soft threshold: the same, in the background, so
                           the request that crosses the limit finds its checkpoint ready

A summarizer failure or timeout, an open breaker or a store outage never fails the request:
``compact`` returns None and the caller truncates instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from proxy.allowance import Allowance, TeamQuota
from proxy.breaker import Breaker
from proxy.policy_config import PolicyConfig
from proxy.summarizer import LLMSummarizer, SummarizerFailed, SummarizerOverflow, Target
from strategies.checkpoint import (
    Checkpoint,
    CheckpointStore,
    apply_summary,
    best_checkpoint,
    prefix_chain,
)
from strategies.messages import Message, leading_count
from strategies.summary import (
    FileLists,
    SummaryText,
    chunks,
    find_cut,
    keep_recent_tokens,
    merge_split,
    summary_request,
    track_files,
    turn_prefix_request,
)
from strategies.tokens import Counter, count_messages, count_prompt

log = logging.getLogger("contextwarden.compaction")
T = TypeVar("T")

SESSION_MEMORY_CHARS = 20000
SEEN_CONVERSATIONS = 65536
LOCK_POLL_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class Context:
    """What one request's compaction needs to know."""

    team: str
    counter: Counter
    policy: PolicyConfig
    target: Target
    reserve: int
    window: int  # the summarizer's own context window
    calls_per_hour: int | None = None  # the team's cap on summarizer calls
    scope: str = ""  # whose checkpoints: the team, or in passthrough the team and the caller

    def __post_init__(self) -> None:
        if not self.scope:
            object.__setattr__(self, "scope", self.team)


@dataclass(slots=True)
class Compacted:
    messages: list[Message]
    event: str  # "created", "reused", "session-memory" or (a dry run) "would-summarize"
    checkpoint_id: str | None = None
    detail: str | None = None  # a dry run: what would be summarized
    pending_tokens: int = 0  # a dry run: how much larger the real summary may be


@dataclass(slots=True)
class Stats:
    created: int = 0
    reused: int = 0
    failures: int = 0
    skipped_by_breaker: int = 0
    store_errors: int = 0
    background: int = 0


def summary_max_tokens(configured: int | None, budget: int) -> int:
    """The summarizer's output cap: configured, else an eighth of the budget within 128..4096."""
    return configured or min(4096, max(128, budget // 8))


def checkpoint_id(scope: str, chain_hash: str) -> str:
    """Unique per scope: two callers with the same conversation get two checkpoints."""
    return "ck_" + hashlib.blake2b(f"{scope}\n{chain_hash}".encode(), digest_size=10).hexdigest()


class Compactor:
    def __init__(
        self,
        store: CheckpointStore,
        llm: LLMSummarizer,
        on_latency: Callable[[float], None] | None = None,
    ) -> None:
        self.store = store
        self.llm = llm
        self._on_latency = on_latency
        self.stats = Stats()
        self._inflight: dict[str, asyncio.Task[Checkpoint | None]] = {}
        self._background: set[asyncio.Task[Checkpoint | None]] = set()
        self._breakers: dict[str, Breaker] = {}
        self._quotas: dict[str, TeamQuota] = {}
        self._conversations: OrderedDict[str, None] = OrderedDict()  # seen, most recent last

    def figures(self) -> dict[str, float]:
        """Counters for /metrics."""
        return {
            "calls": self.llm.calls,
            "failures": self.stats.failures,
            "store_errors": self.stats.store_errors,
            "breakers_open": sum(b.state == "open" for b in self._breakers.values()),
            "store_disabled": float(bool(getattr(self.store, "disabled", None))),
        }

    def team_figures(self) -> dict[str, dict[str, int | None]]:
        """Per team, for /admin/stats: calls made, calls refused by the team's cap, and what
        is left of the cap this hour."""
        now = time.monotonic()
        return {
            team: {"calls": q.calls, "refused": q.refused, "left_this_hour": q.left(now)}
            for team, q in self._quotas.items()
        }

    def _allowance(self, ctx: Context) -> Allowance:
        quota = self._quotas.get(ctx.team)
        if quota is None or quota.per_hour != ctx.calls_per_hour:
            quota = self._quotas[ctx.team] = TeamQuota(ctx.calls_per_hour)
        cfg = ctx.policy.summarizer
        return Allowance.start(cfg.max_calls_per_request, cfg.deadline_seconds, quota)

    def breaker(self, ctx: Context) -> Breaker:
        key = ctx.target.key
        if key not in self._breakers:
            self._breakers[key] = Breaker(ctx.policy.summarizer.breaker_failures)
        return self._breakers[key]

    async def compact(
        self,
        messages: list[Message],
        budget: int,
        ctx: Context,
        session_memory: str | None = None,
        dry_run: bool = False,
    ) -> Compacted | None:
        """A view of ``messages`` with old history replaced by a summary, or None (truncate).

        ``dry_run`` (the preview) reads the store but never calls the summarizer nor writes:
        a reusable checkpoint is reported as reused, anything else as what would be
        summarized, with a placeholder where the summary would go."""
        chain = prefix_chain(messages)
        if len(chain) < 2:
            return None
        if session_memory:
            return self._session_memory(messages, budget, ctx, session_memory)
        best = best_checkpoint(await self._candidates(ctx.scope, chain[1]), chain)
        if best is not None:
            view = apply_summary(messages, best.covers, best.text(ctx.policy.summary_role))
            tokens = count_prompt(ctx.counter, view)
            if tokens <= budget:
                if dry_run:
                    return Compacted(view, "reused", best.id)
                self.stats.reused += 1
                if tokens > int(budget * ctx.policy.summarizer.soft_threshold):
                    self._spawn(messages, chain, best, budget, ctx)  # update it ahead of time
                return Compacted(view, "reused", best.id)
        if (
            best is None
            and not self._seen(ctx, chain)
            and not ctx.policy.summarizer.summarize_unseen
        ):
            # A conversation never seen before may be a one-off: truncate it rather than pay
            # for a summary nobody reuses; if it comes back, it is summarized then.
            return None
        if dry_run:
            return self._estimate(messages, best, budget, ctx)
        made = await self._single_flight(messages, chain, best, budget, ctx, wait=True)
        if made is None and best is not None:
            # No newer summary (nothing to cut, the summarizer failed, the allowance is spent):
            # keep the one the conversation has, so its prompt prefix stays as it was; the
            # engine trims within that view.
            view = apply_summary(messages, best.covers, best.text(ctx.policy.summary_role))
            return Compacted(view, "reused", best.id)
        if made is None:
            return None
        return Compacted(
            apply_summary(messages, made.covers, made.text(ctx.policy.summary_role)),
            "created",
            made.id,
        )

    async def precompact(self, messages: list[Message], budget: int, ctx: Context) -> None:
        """Start summarizing in the background when the view would be over the soft threshold."""
        chain = prefix_chain(messages)
        if len(chain) < 2 or self._flight_key(ctx, chain) in self._inflight:
            return
        if not self._seen(ctx, chain) and not ctx.policy.summarizer.summarize_unseen:
            return  # prepared from its next request on, if there is one
        soft = int(budget * ctx.policy.summarizer.soft_threshold)
        best = best_checkpoint(await self._candidates(ctx.scope, chain[1]), chain)
        view = (
            apply_summary(messages, best.covers, best.text(ctx.policy.summary_role))
            if best
            else messages
        )
        if count_prompt(ctx.counter, view) <= soft:
            return
        self._spawn(messages, chain, best, budget, ctx)

    def _spawn(
        self,
        messages: list[Message],
        chain: list[str],
        best: Checkpoint | None,
        budget: int,
        ctx: Context,
    ) -> None:
        if self._flight_key(ctx, chain) in self._inflight:
            return
        self.stats.background += 1
        work = self._single_flight(messages, chain, best, budget, ctx, wait=False)
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background summaries (shutdown and tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def _flight_key(self, ctx: Context, chain: Sequence[str]) -> str:
        return f"{ctx.scope}:{chain[1]}"

    def _seen(self, ctx: Context, chain: Sequence[str], remember: bool = True) -> bool:
        """Whether this conversation came by before (and remember that it has now)."""
        key = self._flight_key(ctx, chain)
        seen = key in self._conversations
        if not remember:
            return seen
        self._conversations[key] = None
        self._conversations.move_to_end(key)
        if len(self._conversations) > SEEN_CONVERSATIONS:
            self._conversations.popitem(last=False)
        return seen

    async def _single_flight(
        self,
        messages: list[Message],
        chain: list[str],
        best: Checkpoint | None,
        budget: int,
        ctx: Context,
        wait: bool,
    ) -> Checkpoint | None:
        key = self._flight_key(ctx, chain)
        running = self._inflight.get(key)
        if running is not None:
            if not wait:
                return None
            made = await asyncio.shield(running)
            return best_checkpoint([made], chain) if made else None
        task = asyncio.create_task(self._locked_make(key, messages, chain, best, budget, ctx, wait))
        self._inflight[key] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._inflight.pop(key, None)
            else:
                task.add_done_callback(lambda _: self._inflight.pop(key, None))

    async def _locked_make(
        self,
        key: str,
        messages: list[Message],
        chain: list[str],
        best: Checkpoint | None,
        budget: int,
        ctx: Context,
        wait: bool,
    ) -> Checkpoint | None:
        """Across replicas: whoever takes the store's lock summarizes; the others wait for it."""
        ttl = ctx.policy.summarizer.timeout * 3
        try:
            taken = await self.store.acquire(key, ttl)
        except Exception as exc:  # a store fault: truncate now rather than wait on a dead store
            self._store_fault(exc)
            return None
        if not taken:  # another replica summarizes this conversation: wait for its checkpoint
            return await self._await_other(chain, best, ctx) if wait else None
        try:
            return await self._make(messages, chain, best, budget, ctx)
        finally:
            await self._guard(self.store.release(key), None)

    async def _await_other(
        self, chain: list[str], best: Checkpoint | None, ctx: Context
    ) -> Checkpoint | None:
        deadline = time.monotonic() + ctx.policy.summarizer.timeout
        floor = best.covers if best else 0
        while time.monotonic() < deadline:
            await asyncio.sleep(LOCK_POLL_SECONDS)
            try:
                candidates = await self.store.candidates(ctx.scope, chain[1])
            except Exception as exc:
                self._store_fault(exc)
                return None
            found = best_checkpoint(candidates, chain)
            if found is not None and found.covers > floor:
                return found
        return None

    async def _make(
        self,
        messages: list[Message],
        chain: list[str],
        previous: Checkpoint | None,
        budget: int,
        ctx: Context,
    ) -> Checkpoint | None:
        lead = leading_count(messages)
        start = lead + (previous.covers if previous else 0)
        keep = keep_recent_tokens(budget, ctx.policy.summarizer.keep_recent_tokens)
        cut = find_cut(messages, start, keep, ctx.counter, budget // 2)
        if cut is None:
            return None
        breaker = self.breaker(ctx)
        if not breaker.allow():
            self.stats.skipped_by_breaker += 1
            return None
        began = time.monotonic()
        allowance = self._allowance(ctx)
        try:
            text = await self._summarize(
                messages, start, cut.index, cut.turn_start, previous, budget, ctx, allowance
            )
        except SummarizerFailed as exc:
            breaker.failure()
            self.stats.failures += 1
            log.warning("summarization failed, truncating instead: %s", exc)
            return None
        breaker.success()
        if self._on_latency is not None:
            self._on_latency(time.monotonic() - began)
        carried = previous.files if previous else FileLists()
        files = track_files(messages[start : cut.index], ctx.policy.file_tools(), carried)
        summary = SummaryText(text, files, ctx.policy.summary_role)
        covers = cut.index - lead
        checkpoint = Checkpoint(
            id=checkpoint_id(ctx.scope, chain[covers]),
            conversation=chain[1],
            covers=covers,
            chain_hash=chain[covers],
            summary=text,
            tokens_before=count_messages(ctx.counter, messages[lead : cut.index]),
            tokens_after=ctx.counter.message(summary.message()),
            files=files,
            created_at=time.time(),
            previous_id=previous.id if previous else None,
        )
        if checkpoint.tokens_after > budget // 2:
            breaker.failure()
            self.stats.failures += 1
            log.warning(
                "summary of %d tokens is too large for a %d budget", checkpoint.tokens_after, budget
            )
            return None
        await self._guard(self.store.put(ctx.scope, checkpoint), None)
        self.stats.created += 1
        return checkpoint

    async def _summarize(
        self,
        messages: list[Message],
        start: int,
        end: int,
        turn_start: int | None,
        previous: Checkpoint | None,
        budget: int,
        ctx: Context,
        allowance: Allowance,
    ) -> str:
        """Summarize ``[start, end)``: the history as a chain of calls that each fit the
        summarizer's window (each one updating the summary so far), and the beginning of a split
        turn in parallel."""
        max_tokens = summary_max_tokens(ctx.policy.summarizer.max_tokens, budget)
        # The prompt around the conversation, with the largest previous summary it can carry.
        prompts = ctx.policy.prompts()
        overhead = count_prompt(ctx.counter, summary_request([], "x " * max_tokens, prompts))
        capacity = int((ctx.window - max_tokens - overhead) * 0.9)
        for _ in range(3):  # a summarizer whose tokenizer counts more: smaller pieces
            if capacity < 64:
                break
            try:
                return await self._summarize_in(
                    messages, start, end, turn_start, previous, capacity, max_tokens, ctx, allowance
                )
            except SummarizerOverflow:
                capacity = capacity * 6 // 10
        raise SummarizerFailed(f"a {ctx.window}-token window leaves too little room to summarize")

    async def _summarize_in(
        self,
        messages: list[Message],
        start: int,
        end: int,
        turn_start: int | None,
        previous: Checkpoint | None,
        capacity: int,
        max_tokens: int,
        ctx: Context,
        allowance: Allowance,
    ) -> str:
        cfg = ctx.policy.summarizer
        prompts = ctx.policy.prompts()
        history_end = end if turn_start is None else turn_start
        pieces = chunks(messages[start:history_end], capacity, ctx.counter)
        extra = 0 if turn_start is None else 1
        affordable = allowance.affordable(len(pieces) + extra) - extra
        if affordable < min(1, len(pieces)):
            raise SummarizerFailed("no summarizer call is left for this request or team")
        if affordable < len(pieces):
            # Too long to summarize within the allowance: the oldest pieces are dropped, as
            # truncation would have dropped them, and the summary covers the most recent ones.
            log.info("summarizing the last %d of %d pieces", affordable, len(pieces))
            pieces = pieces[len(pieces) - affordable :]

        async def history() -> str | None:
            summary = previous.summary if previous else None
            for chunk in pieces:
                request = summary_request(chunk, summary, prompts, capacity * 2)
                timeout = allowance.take(cfg.timeout)
                summary = await self.llm.complete(request, ctx.target, max_tokens, timeout)
            return summary

        if turn_start is None:
            text = await history()
            if text is None:
                raise SummarizerFailed("nothing to summarize")
            return text
        prefix_request = turn_prefix_request(messages[turn_start:end], prompts, capacity * 2)
        prefix = self.llm.complete(
            prefix_request, ctx.target, max(64, max_tokens // 2), allowance.take(cfg.timeout)
        )
        summary, turn = await asyncio.gather(history(), prefix)
        return merge_split(summary, turn)

    def _estimate(
        self, messages: list[Message], previous: Checkpoint | None, budget: int, ctx: Context
    ) -> Compacted | None:
        """What ``_make`` would summarize, without summarizing: the same cut, a placeholder."""
        lead = leading_count(messages)
        covered = previous.covers if previous else 0
        keep = keep_recent_tokens(budget, ctx.policy.summarizer.keep_recent_tokens)
        cut = find_cut(messages, lead + covered, keep, ctx.counter, budget // 2)
        if cut is None:
            return None
        count = cut.index - lead - covered
        tokens = count_messages(ctx.counter, messages[lead + covered : cut.index])
        detail = f"{count} messages (about {tokens} tokens)"
        note = f"[preview: the summary of {detail} would be written here]"
        placeholder = SummaryText(note, role=ctx.policy.summary_role)
        expected = summary_max_tokens(ctx.policy.summarizer.max_tokens, budget)
        pending = max(0, expected - ctx.counter.message(placeholder.message()))
        view = apply_summary(messages, cut.index - lead, placeholder)
        return Compacted(view, "would-summarize", None, detail, pending)

    def _session_memory(
        self, messages: list[Message], budget: int, ctx: Context, seed: str
    ) -> Compacted | None:
        lead = leading_count(messages)
        keep = keep_recent_tokens(budget, ctx.policy.summarizer.keep_recent_tokens)
        cut = find_cut(messages, lead, keep, ctx.counter, budget // 2)
        if cut is None:
            return None
        summary = SummaryText(seed[:SESSION_MEMORY_CHARS], role=ctx.policy.summary_role)
        return Compacted(apply_summary(messages, cut.index - lead, summary), "session-memory")

    async def _candidates(self, team: str, conversation: str) -> list[Checkpoint]:
        return await self._guard(self.store.candidates(team, conversation), [])

    async def _guard(self, call: Awaitable[T], fallback: T) -> T:
        """A store outage degrades to "no checkpoint", never to a failed request."""
        try:
            return await call
        except Exception as exc:  # sqlite3, redis and OS errors alike
            self._store_fault(exc)
            return fallback

    def _store_fault(self, exc: Exception) -> None:
        self.stats.store_errors += 1
        log.debug("checkpoint store unavailable: %s", exc)
