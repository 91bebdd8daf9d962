"""``truncate_oldest``: remove the oldest messages until the block fits.

contexty's TruncateOldest, turn-atomic as at its later releases: the oldest removable *group* goes
first, and a group never splits an assistant ``tool_calls`` message from its results. ``unit``
chooses the group: ``message`` (one atomic unit), ``pair`` (a user message with the assistant
answer after it; contexty's KeepUserAssistantPairs), ``turn`` (a user message and everything up
to the next user message) or ``step`` (an agent's step: an assistant message with its calls'
results and whatever follows up to the next assistant message). Groups containing a role from
``protect_roles`` are never removed. A result shorter than ``min_messages`` drops the block
instead. Beyond contexty: when whole turns would empty the block, the newest turn keeps its
opening message and its newest units that fit (``_keep_in_part``).

With ``grid_tokens`` set, the cut is made cache-friendly: instead of removing just enough, it
removes up to the next multiple of ``grid_tokens`` counted from the start of the block. The cut
then depends only on the messages, not on the request, so the following requests of a growing
conversation cut at the same place (and forward the same prompt prefix, which providers bill at a
discount) until the conversation has grown by another grid step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from strategies.messages import Message, Unit, role, units
from strategies.tokens import Counter

GroupUnit = Literal["message", "pair", "turn", "step"]


class TruncateOldest:
    name = "truncate_oldest"
    label = "truncated"

    def __init__(
        self,
        unit: GroupUnit = "message",
        min_messages: int = 0,
        protect_roles: Sequence[str] = (),
        grid_tokens: int = 0,
        grid_share: float = 0.0,
    ) -> None:
        """``grid_share``: the grid as a share of the request's budget (set by ``bind``)."""
        if min_messages < 0 or grid_tokens < 0 or not 0 <= grid_share < 1:
            raise ValueError("min_messages and grid_tokens must be >= 0, grid_share in [0, 1)")
        self.unit: GroupUnit = unit
        self.min_messages = min_messages
        self.protect_roles = frozenset(protect_roles)
        self.grid_tokens = grid_tokens
        self.grid_share = grid_share

    def bind(self, *, query: str, budget: int, grid_share: float | None = None) -> TruncateOldest:
        """This strategy for one request: the cache grid from the request's budget (and, when
        the request's prices call for a deeper cut, its ``grid_share``; never shallower)."""
        share = self.grid_share if grid_share is None else max(self.grid_share, grid_share)
        if share <= 0 or self.grid_share <= 0:
            return self
        grid = max(1, int(budget * share))
        return TruncateOldest(self.unit, self.min_messages, tuple(self.protect_roles), grid)

    def _protected(self, messages: Sequence[Message], group: Unit) -> bool:
        return any(role(messages[i]) in self.protect_roles for i in range(group.start, group.end))

    def apply(
        self, messages: Sequence[Message], original_tokens: int, limit: int, counter: Counter
    ) -> list[Message]:
        costs = [counter.message(m) for m in messages]
        total = sum(costs)
        target = total - limit
        groups = removal_groups(messages, self.unit)
        removable = [g for g in groups if not self._protected(messages, g)]
        if self.grid_tokens > 0 and target > 0:
            # On the grid, but never past the newest group when it need not go: the grid
            # rounds a cut up, and the newest step of a tool loop is what the model answers.
            spare = sum(sum(costs[g.start : g.end]) for g in removable[:-1])
            gridded = -(-target // self.grid_tokens) * self.grid_tokens
            target = gridded if target > spare else min(gridded, spare)
        removed = [False] * len(messages)
        freed = 0
        last: Unit | None = None
        for group in removable:
            if freed >= target:
                break
            last = group
            for i in range(group.start, group.end):
                removed[i] = True
                freed += costs[i]
        if self.unit == "turn" and last is removable[-1] and last is not None:
            _keep_in_part(messages, last, costs, freed - target, removed)
        kept = [m for m, gone in zip(messages, removed, strict=True) if not gone]
        if not kept or len(kept) < self.min_messages:
            return []
        return kept


def _keep_in_part(
    messages: Sequence[Message], turn: Unit, costs: list[int], room: int, removed: list[bool]
) -> None:
    """Whole turns would leave no history (``turn``, the newest, went too): its opening
    message and its newest units that fit in ``room`` (what removing it whole freed past the
    target) are kept, so a conversation resumed after one long turn (an agent's task, its
    steps, its answer) keeps the task and how it ended rather than nothing. Units never split:
    a call keeps its results."""
    atoms = units(messages, turn.start, turn.end)
    opener = sum(costs[atoms[0].start : atoms[0].end])
    if opener > room:
        return
    room -= opener
    back = [atoms[0]]
    for atom in reversed(atoms[1:]):
        cost = sum(costs[atom.start : atom.end])
        if cost > room:
            break
        room -= cost
        back.append(atom)
    for atom in back:
        for i in range(atom.start, atom.end):
            removed[i] = False


def removal_groups(messages: Sequence[Message], unit: GroupUnit) -> list[Unit]:
    """The groups ``truncate_oldest`` removes, oldest first."""
    atoms = units(messages)
    if unit == "message":
        return atoms
    if unit == "pair":
        return _pairs(messages, atoms)
    if unit == "step":
        return _grouped(messages, atoms, "assistant")
    return _grouped(messages, atoms, "user")


def _pairs(messages: Sequence[Message], atoms: list[Unit]) -> list[Unit]:
    out: list[Unit] = []
    i = 0
    while i < len(atoms):
        a = atoms[i]
        nxt = atoms[i + 1] if i + 1 < len(atoms) else None
        if role(messages[a.start]) == "user" and nxt and role(messages[nxt.start]) == "assistant":
            out.append(Unit(a.start, nxt.end))
            i += 2
        else:
            out.append(a)
            i += 1
    return out


def _grouped(messages: Sequence[Message], atoms: list[Unit], opener: str) -> list[Unit]:
    """Units grouped from each one that ``opener`` starts up to the next."""
    out: list[Unit] = []
    for a in atoms:
        if out and messages[a.start].get("role") != opener:
            out[-1] = Unit(out[-1].start, a.end)
        else:
            out.append(a)
    return out
