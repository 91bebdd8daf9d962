"""What the planner draws on between requests (planner.py: ``Planner`` is this with its
entry points): the settings, the summaries' compactor, and each conversation's
memories (its last forwarded prompt, its last cut, the originals of its cleared outputs, its
last counts). The planner's parts (first_sight.py, allowances.py, fit_to_budget.py,
sticky_replay.py, deep_cuts.py) take it, so they import nothing above them.

An ``Attempt`` is one request as the planner's parts pass it along: this state, the request,
its original messages' count and the counter that made it, and whether it is a dry run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.config.settings import Settings
from proxy.request.conversations import PrefixTracker
from proxy.request.recall import RecallMemory
from proxy.request.reused_counts import RecentCounts
from proxy.request.sticky_cuts import CutMemory
from proxy.summaries import Compactor
from proxy.wire import WireRequest
from strategies.tokens import MemoCounter, count_prompt


@dataclass(kw_only=True, eq=False)
class PlannerState:
    settings: Settings
    compactor: Compactor | None
    prefixes: PrefixTracker | None = None
    cuts: CutMemory | None = None
    recalls: RecallMemory | None = None
    recent: RecentCounts = field(default_factory=RecentCounts, init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One request being planned: the planner's state, the request, the count of its
    original messages (``before``) by the counter that made it (its memo reused by every
    fit of the attempt), and whether it is a dry run (the preview: no summarizer is called,
    nothing is remembered)."""

    planner: PlannerState
    req: WireRequest
    counter: MemoCounter
    before: int
    dry_run: bool = False


def attempt_of(
    planner: PlannerState,
    req: WireRequest,
    tokens: int | None = None,
    memo: MemoCounter | None = None,
    dry_run: bool = False,
) -> Attempt:
    """The attempt at ``req``; ``tokens``: its messages' count, when ``memo`` made it already
    (else it is made here, once)."""
    counter = memo or MemoCounter(req.counter())
    before = tokens if tokens is not None else count_prompt(counter, req.view.messages)
    return Attempt(planner=planner, req=req, counter=counter, before=before, dry_run=dry_run)
