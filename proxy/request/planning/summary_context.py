"""What the summarizer needs of a request (proxy/summaries: ``Context``): its team, counter and
policy, the summary's target, the room beside it, and the messages a summary must leave whole
(pinned, standing rules, the current turn).
"""

from __future__ import annotations

from proxy.config.settings import Settings
from proxy.summaries import Context
from proxy.summaries.llm import target_for
from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.rules import pinned_ids
from strategies.standing import standing_ids
from strategies.tokens import MemoCounter


def summary_context(
    settings: Settings, req: WireRequest, budget: Budget, counter: MemoCounter
) -> Context:
    """What the compactor needs of the request; ``counter`` is the request's own, which
    has priced its messages already."""
    window = req.policy.config.summarizer.context_window or budget.window
    team = settings.teams.get(req.team)
    calls = team.summarizer_calls_per_hour if team is not None else None
    quota, makes = req.team, True
    if req.shadow:  # its own allowance, counted apart from the team's enforced one
        calls = team.shadow_summarizer_calls_per_hour if team is not None else 0
        quota, makes = shadow_quota(req.team), bool(calls)
    return Context(
        team=quota,
        counter=counter,
        policy=req.policy.config,
        target=target_for(settings, req),
        reserve=budget.reserve,
        window=window,
        calls_per_hour=calls,
        scope=req.scope or req.team,
        pinned=req.pinned
        | pinned_ids(req.view.messages, req.policy.engine.pins)
        | standing_ids(
            req.view.messages,
            counter,
            budget.messages,
            req.policy.engine.standing_share,
            req.view.continuing,
        ),
        running=req.view.atomic_current,
        continuing=req.view.continuing,
        owner=req.owner,
        makes=makes,
    )


def shadow_quota(team: str) -> str:
    """The name a team's shadow summaries are counted under (its quota, its breaker)."""
    return f"{team}:shadow"
