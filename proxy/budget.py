"""The one budget rule: how many tokens a request's messages may use.

``window - reply reserve - tool definitions - safety margin``, for the first attempt, an
overflow retry (with the learned window) and the preview alike. The window already holds the
team's cap (``max_context_tokens``) and what overflows taught; the reserve is the request's own
output limit, else the team's or the default, capped by the model's output limit and a quarter
of the window.
"""

from __future__ import annotations

from proxy.config import Trimming
from proxy.errors import ContextTooLarge
from proxy.intake import WireRequest
from strategies.budget import Budget, reply_reserve


def budget_for(req: WireRequest, window: int, trimming: Trimming) -> Budget:
    """The one budget rule, for the first attempt, a retry and the preview alike:
    ``window - reply reserve - tool definitions - safety margin``. The reserve is the request's
    own output limit, else the team's or the default reserve capped by the model's output limit
    and a quarter of the window."""
    default = req.reserve_default
    if default is None:
        default = trimming.reserve_output_tokens
    asked = req.fmt.requested_output(req.payload)
    reserve = reply_reserve(asked, default, req.spec.max_output, window)
    tools = req.spec.pricing.counter.tools(req.payload.get("tools"), req.payload.get("functions"))
    return checked(Budget(window, reserve, tools, trimming.safety_margin_tokens))


def checked(budget: Budget) -> Budget:
    """``budget``, or ContextTooLarge when it leaves no room for the messages."""
    if budget.messages <= 0:
        raise ContextTooLarge(
            f"no room is left for the messages: {budget.explain()}", param="messages"
        )
    return budget
