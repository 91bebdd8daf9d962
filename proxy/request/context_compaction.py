"""A compaction the client asks the server for, served for an upstream without it (the wire
sides: proxy/formats/responses_context.py for Responses ``context_management``,
proxy/formats/anthropic_compaction.py for Anthropic's ``compact_20260112`` edit and
``compaction`` parameter). Once the input counts past the threshold the client asked for, the
answer carries a compaction made from the proxy's own summary of that input, first in its
output or content, as the provider's API answers; a compaction that pauses (or a request that
is only one) is answered with it alone, without the model. The request itself is fitted and
forwarded as any other; the client keeps the compaction in place of the input it stands for,
and the proxy reads it back as a summary. The compaction holds the ledger of that input
(strategies/ledger.py) before the summary: what a weak summary drops of the rules, decisions
and facts stays.

No compaction when no summary could be made (no summarizer, a failure, a breaker, a
deadline): the client then keeps its whole history, which the proxy fits as before (a
compaction standing for a failed summary would make it drop what it needs); a request that is
only a compaction gets Anthropic's failed one (content null, which the API ignores).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson
from starlette.responses import Response

from proxy.errors import Invariant
from proxy.formats import anthropic_compaction as anthropic
from proxy.formats import responses_context as responses
from proxy.formats.anthropic_compaction import alone, block, events
from proxy.formats.compaction import item_of
from proxy.formats.responses_context import DEFAULT
from proxy.request.planning.ledger import cap
from proxy.upstreams.forwarding import Reply, is_event_stream, rewrite_answer
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.ledger import extract, fitted
from strategies.messages import leading_count
from strategies.tokens import count_prompt

if TYPE_CHECKING:
    from proxy.request.planning.planner import Planner
    from proxy.summaries import Compactor
    from strategies.checkpoints.chain import Checkpoint
    from strategies.messages import Message

SHARE = 0.8  # of the window: the threshold of a request that asked for none
HANDOFF_WINDOW = 32_000  # the summarizer's window when the model's is unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class Summaries:
    """What a compaction's summary is made with: the summarizer's compactor, the planner (the
    summary's context for the request) and the reply reserve the settings keep."""

    compactor: Compactor
    planner: Planner
    reserve_output_tokens: int

    async def handoff(
        self, req: WireRequest, messages: list[Message]
    ) -> tuple[Checkpoint | None, Budget]:
        """``messages`` summarized for ``req``'s model, and the budget the summary was cut
        for: its window (or ``HANDOFF_WINDOW`` when unknown) and a reply reserve (at most a
        quarter of the window, as the budget keeps it elsewhere: a small model's window would
        leave the summary and the ledger no room at all; never checked for room: the request
        itself is not fitted here)."""
        window = req.window or HANDOFF_WINDOW
        budget = Budget(
            window=window, reserve=min(self.reserve_output_tokens, window // 4), tools=0, margin=0
        )
        ctx = self.planner.summary_context(req, budget)
        return await self.compactor.handoff(messages, ctx), budget


def threshold(req: WireRequest) -> int | None:
    """The input size past which ``req``'s answer carries a compaction (None: never)."""
    if req.compaction is None:
        return None
    if req.compaction.only:
        return 0
    if req.compaction.at != DEFAULT:
        return req.compaction.at
    return int(req.window * SHARE) if req.window else None


async def compaction_summary(summaries: Summaries, req: WireRequest) -> str | None:
    """The summary ``req``'s answer carries as a compaction: None under the threshold, or when
    no summary could be made."""
    at = threshold(req)
    messages = req.view.messages
    if at is None or not messages or count_prompt(req.counter(), messages) < at:
        return None
    checkpoint, budget = await summaries.handoff(req, messages)
    if checkpoint is None:
        return None
    # The ledger of what the compaction stands for goes first: the rules, decisions, names and
    # files it established, read without a model, whatever the summary kept of them.
    entries = extract(messages, range(leading_count(messages), len(messages)))
    ledger = fitted(entries, cap(req, budget), req.counter()) if entries else None
    return f"{ledger}\n\n{checkpoint.summary}" if ledger else checkpoint.summary


def made(req: WireRequest, summary: str | None) -> dict[str, Any]:
    """The compaction in ``req``'s format: a Responses item, or a Messages block (whose content
    is null for a compaction that failed, as Anthropic's API says it)."""
    if req.fmt.api == "messages":
        return block(summary)
    if summary is None:
        raise Invariant("a Responses compaction is made of a summary")
    return item_of(summary)


def carry(reply: Reply, compaction: dict[str, Any], api: str) -> bool:
    """A 200 answer with ``compaction`` first in its output or content; whether it carries it
    (an answer the upstream encoded is left as it came)."""
    wire = anthropic if api == "messages" else responses
    whole = partial(wire.carried_body, made=compaction)
    events = partial(wire.carried_stream, made=compaction)
    return rewrite_answer(reply, whole, events, is_event_stream(reply.headers))


def paused(req: WireRequest, summary: str | None) -> Response:
    """The answer of a compaction that pauses (Anthropic's ``pause_after_compaction``, or its
    ``compaction`` parameter): the compaction alone, no model's turn."""
    compaction = block(summary)
    counter = req.counter()
    usage = {
        "input": count_prompt(counter, req.view.messages),
        "output": counter.message({"role": "assistant", "content": summary or ""}),
    }
    message = alone(req.payload, compaction, usage)
    headers = {"x-contextwarden-actions": "compaction-served"}
    if req.payload.get("stream"):
        return Response(events(message), 200, headers, media_type="text/event-stream")
    return Response(orjson.dumps(message), 200, headers, media_type="application/json")
