"""A handoff summary: the whole conversation so far in one summary, for a client that compacts
its own history through the API (Codex's Responses compaction, answered by the proxy for an
upstream that does not implement it: proxy/request/compaction.py).

It is made as the other checkpoints are (the same chained calls, each fitting the summarizer's
window, within the request's allowance, behind the summarizer's breaker) and kept as the
conversation's checkpoint; but its cut is the end of the conversation: the client keeps its own
user messages beside it and drops everything else, so everything after the leading
instructions is summarized.
"""

from __future__ import annotations

import time

from proxy.summaries.allowance import Allowance
from proxy.summaries.breaker import Breaker
from proxy.summaries.job import BreakerOpen, Context, Job, checkpoint_id, summarize
from proxy.summaries.llm import AllowanceSpent, LLMSummarizer, SummarizerFailed
from strategies.checkpoints.chain import Checkpoint, prefix_chain
from strategies.checkpoints.cut import Cut, FileLists, SummaryText, track_files
from strategies.messages import Message, leading_count
from strategies.tokens import count_messages


async def make_handoff(
    messages: list[Message],
    ctx: Context,
    llm: LLMSummarizer,
    allowance: Allowance,
    breaker: Breaker,
) -> Checkpoint:
    """The checkpoint that summarizes all of ``messages`` after their leading instructions;
    SummarizerFailed when none can be made."""
    lead = leading_count(messages)
    if lead >= len(messages):
        raise SummarizerFailed("nothing to summarize")
    chain = prefix_chain(messages)
    job = Job(messages=messages, chain=chain, previous=None, budget=ctx.window, ctx=ctx)
    if not breaker.allow():
        raise BreakerOpen("the summarizer's breaker is open: skipped once")
    try:
        text = await summarize(job, lead, Cut(len(messages)), llm, allowance)
    except AllowanceSpent:
        raise
    except SummarizerFailed:
        breaker.failure()
        raise
    breaker.success()
    covers = len(messages) - lead
    files = track_files(messages[lead:], ctx.policy.file_tools(), FileLists())
    summary = SummaryText(text=text, files=files, role=ctx.policy.summary_role)
    return Checkpoint(
        id=checkpoint_id(ctx.scope, chain[covers]),
        conversation=chain[1],
        covers=covers,
        chain_hash=chain[covers],
        summary=text,
        tokens_before=count_messages(ctx.counter, messages[lead:]),
        tokens_after=ctx.counter.message(summary.message()),
        files=files,
        created_at=time.time(),
    )
