"""What the planner draws on between requests (planner.py: ``Planner`` is this with its
entry points): the settings, the summaries' compactor, and each conversation's
memories (its last forwarded prompt, its last cut, the originals of its cleared outputs, its
last counts). The planner's parts (first_sight.py, allowances.py, fit_to_budget.py,
sticky_replay.py, deep_cuts.py) take it, so they import nothing above them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.config.settings import Settings
from proxy.request.conversations import PrefixTracker
from proxy.request.recall import RecallMemory
from proxy.request.reused_counts import RecentCounts
from proxy.request.sticky_cuts import CutMemory
from proxy.summaries import Compactor


@dataclass(eq=False)
class PlannerState:
    settings: Settings
    compactor: Compactor | None
    prefixes: PrefixTracker | None = None
    cuts: CutMemory | None = None
    recalls: RecallMemory | None = None
    recent: RecentCounts = field(default_factory=RecentCounts, init=False)
