"""The one budget rule: how many tokens a request's messages may use.

``window - reply reserve - tool definitions - safety margin``, for the first attempt, an
overflow retry (with the learned window) and the preview alike. The window already holds the
team's cap (``max_context_tokens``) and what overflows taught; the reserve is the request's own
output limit, else the team's or the default, capped by the model's output limit and a quarter
of the window.

A request's own output limit that does not fit beside its prompt is lowered to what is left,
down to the policy's ``min_output_tokens`` (``lower_max_tokens``, on by default): a client that
asks for 64000 tokens of a 72000-token window asks for as long a reply as the window allows,
not for its conversation to be cut to make room. The budget then reserves only that floor, and
``settled`` writes the lowered limit once the prompt is counted. When even what must be kept
does not fit beside that floor, the planner lowers the limit further (to what the window
leaves) before it would refuse (proxy/request/planning/allowances.py: ``_roomier``).
"""

from __future__ import annotations

import math
from typing import Any

from proxy.config.settings import Trimming
from proxy.errors import ContextTooLarge
from proxy.formats.recall import RECALL_TOOL
from proxy.wire import WireRequest
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
    floor = output_floor(req, asked)
    reserve = reply_reserve(asked if floor is None else floor, default, req.spec.max_output, window)
    counter = req.spec.pricing.counter
    tools = counter.tools(req.payload.get("tools"), req.payload.get("functions"))
    if req.policy.config.recall:  # the recall tool the plan may offer (proxy/formats/recall.py)
        tools += counter.tools([RECALL_TOOL], None) + RECALL_SLACK
    return checked(
        Budget(window=window, reserve=reserve, tools=tools, margin=trimming.safety_margin_tokens)
    )


# The recall tool's definition is counted in its chat shape; the other formats' shapes differ
# by a few tokens of structure.
RECALL_SLACK = 16


def checked(budget: Budget) -> Budget:
    """``budget``, or ContextTooLarge when it leaves no room for the messages."""
    if budget.messages <= 0:
        error = ContextTooLarge(
            f"no room is left for the messages: {budget.explain()}", param="messages"
        )
        error.budget = budget.messages
        raise error
    return budget


def output_floor(req: WireRequest, asked: int | None) -> int | None:
    """What the reply reserve may be lowered to, when the request asks for more than that and
    the policy lowers; else None (the request's own limit is reserved whole)."""
    config = req.policy.config
    if asked is None or not config.lower_max_tokens or asked <= config.min_output_tokens:
        return None
    return config.min_output_tokens


def settled(req: WireRequest, budget: Budget, tokens: int) -> tuple[dict[str, Any], str] | None:
    """The payload with its output limit lowered to what is left beside a prompt of
    ``tokens`` (messages) and the action that says so; None when the asked limit fits (or the
    policy keeps it: ``lower_max_tokens: false``)."""
    asked = req.fmt.requested_output(req.payload)
    if asked is None or not req.policy.config.lower_max_tokens:
        return None
    # The room in the upstream's units, which a reply limit is in (the window was converted to
    # the proxy's by the calibration: window_ours = window_theirs / units).
    room = math.floor((budget.window - budget.tools - budget.margin - tokens) * req.units)
    if asked <= room:
        return None
    limit = max(room, budget.reserve, 1)
    if limit >= asked:
        return None  # the reserve was the asked limit itself: nothing is lowered
    return req.fmt.with_output(req.payload, limit), f"max-tokens-lowered {asked}->{limit}"
