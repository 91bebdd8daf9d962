"""Sticky replay: under a policy that cuts cache-friendly, a request replays its
conversation's last cut (proxy/request/sticky_cuts.py remembers it, strategies/sticky.py replays it)
with the new messages appended, so its prompt extends the one the provider has cached; when
the replay no longer fits, the request is cut afresh (proxy/request/planning/fit_to_budget.py).
"""

from __future__ import annotations

from proxy.errors import Invariant
from proxy.request.conversations import message_digest
from proxy.request.planning.deep_cuts import prepare
from proxy.request.planning.off_loop import off_loop, work_of
from proxy.request.planning.plan import Plan, plan_of_fit
from proxy.request.planning.planner_state import Attempt
from proxy.summaries.decision import soft_limit, summarizes
from strategies.budget import Budget
from strategies.engine import Fit
from strategies.repair import repair_tool_calls
from strategies.sticky import replay
from strategies.tokens import count_prompt


async def replay_last_cut(attempt: Attempt, key: str, budget: Budget) -> Plan | None:
    """The conversation's last cut replayed with the new messages appended, when that fits
    (and the budget has not grown by a cache grid step since the cut: a calibrated window
    moves a little from request to request); None: cut afresh. Past the soft limit,
    the next summary is prepared in the background, for when the replay stops fitting."""
    planner, req, counter, before = attempt.planner, attempt.req, attempt.counter, attempt.before
    if planner.cuts is None:
        raise Invariant("a sticky cut replayed without a memory of cuts")
    recipe = await planner.cuts.recall(key)
    grid = req.policy.engine.cache_cut_share
    if recipe is None or budget.messages > recipe.budget * (1 + grid):
        return None  # a budget a grid step larger keeps more: worth a new cut
    work = work_of(req)
    messages = await off_loop(work, replay, recipe, req.view.messages, message_digest)
    if messages is None:
        return None
    if req.policy.engine.repair_tool_calls:
        messages = (await off_loop(work, repair_tool_calls, messages))[0]
    tokens = await off_loop(work, count_prompt, counter, messages)
    if tokens > budget.messages:
        return None
    config = req.policy.config
    past_soft = tokens > soft_limit(budget.messages, config)
    summarizing = summarizes(config, req.session_memory, req.client_compaction)
    if past_soft and planner.compactor is not None and summarizing:
        await prepare(planner, req, budget, before, counter)
    actions = [*recipe.actions, "sticky"]
    checkpoint = recipe.checkpoint
    reused = checkpoint.replace("created", "reused", 1) if checkpoint else None
    result = Fit(
        messages=messages,
        tokens_before=before,
        tokens_after=tokens,
        budget=budget.messages,
        actions=list(actions),
    )
    return plan_of_fit(attempt, budget, result, actions, reused)
