"""A Responses request whose ``context_management`` compaction the proxy serves (an upstream
without it; the wire side is proxy/formats/responses_context.py): once its input counts past
the threshold the client asked for, the answer carries a ``compaction`` item made from the
proxy's own summary of that input, first in its output, as OpenAI's API answers. The request
itself is fitted and forwarded as any other; the client keeps the item in place of the input
it stands for, and the proxy expands it into a summary wherever it comes back. The item holds
the ledger of that input (strategies/ledger.py) before the summary: what a weak summary drops
of the rules, decisions and facts stays.

No item when no summary could be made (no summarizer, a failure, a breaker, a deadline): the
client then keeps its whole history, which the proxy fits as before. An item standing for a
failed summary would make it drop what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proxy.formats.compaction import item_of
from proxy.formats.responses_context import DEFAULT
from proxy.request.planning.ledger import cap
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.ledger import extract, fitted
from strategies.messages import leading_count
from strategies.tokens import count_prompt

if TYPE_CHECKING:
    from proxy.runtime import Runtime

SHARE = 0.8  # of the window: the threshold of a request that asked for none
HANDOFF_WINDOW = 32_000  # the summarizer's window when the model's is unknown


def threshold(req: WireRequest) -> int | None:
    """The input size past which ``req``'s answer carries a compaction item (None: never)."""
    if req.compact_at is None:
        return None
    if req.compact_at != DEFAULT:
        return req.compact_at
    return int(req.window * SHARE) if req.window else None


async def compaction_item(rt: Runtime, req: WireRequest) -> dict[str, Any] | None:
    """The compaction item for ``req``'s answer: None under the threshold, or when no summary
    could be made."""
    at = threshold(req)
    messages = req.view.messages
    if at is None or len(messages) < 2 or count_prompt(req.counter(), messages) < at:
        return None
    trimming = rt.settings.trimming
    budget = Budget(req.window or HANDOFF_WINDOW, trimming.reserve_output_tokens, 0, 0)
    checkpoint = await rt.compactor.handoff(messages, rt.planner.summary_context(req, budget))
    if checkpoint is None:
        return None
    # The ledger of what the item stands for goes first: the rules, decisions, names and
    # files it established, read without a model, whatever the summary kept of them.
    entries = extract(messages, range(leading_count(messages), len(messages)))
    ledger = fitted(entries, cap(req, budget), req.counter()) if entries else None
    return item_of(f"{ledger}\n\n{checkpoint.summary}" if ledger else checkpoint.summary)
