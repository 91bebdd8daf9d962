"""The ledger beside a cut: what the messages a fit removed had established (strategies/ledger.py),
forwarded right after the leading instructions, or after the summary when there is one (its
layers, and the pinned messages among them, stay the prompt a provider has cached), and before
the task, on every path that cuts afresh: a fresh or deep cut, a cut whose summary
failed or was refused, the overflow retry. A sticky replay forwards
the cut's ledger as it was recorded: the same bytes.

    reserve       the room a cut keeps for its ledger: the ledger of the oldest history (outside
                  the instructions, the task and its newest step) it will remove, so the
                  engine fits once
    add_ledger    the fit with the ledger of what it did remove, within the room it left
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.engine import Fit
from strategies.ledger import MAX_TOKENS, extract, fitted, removed_indices
from strategies.messages import Message, leading_count
from strategies.protected import protected
from strategies.tokens import MemoCounter

LEDGER = "ledger"  # the action a fit with a ledger reports


def cap(req: WireRequest, full: Budget) -> int:
    """The most a request's ledger may take: the policy's ``ledger`` share of its budget
    (``full``), at most ``MAX_TOKENS``."""
    return min(int(full.messages * req.policy.engine.ledger_share), MAX_TOKENS)


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerCut:
    """The cut a ledger goes with: the request, its counter and its original messages' count
    (``before``), the budget the engine fits to (``budget``: a deep cut's target, or the
    request's own), the request's own (``full``: what caps the ledger), and what the ledger
    and the messages kept share (``whole``: the request's budget when ``budget`` is a deep
    cut's target, else ``budget``)."""

    req: WireRequest
    counter: MemoCounter
    before: int
    budget: Budget
    full: Budget
    whole: Budget


def reserve(cutting: LedgerCut, compacted: list[Message] | None = None) -> Reserved:
    """Tokens to keep free for the ledger of a cut of the request's messages to its
    ``budget``: the ledger of the messages the cut will remove, within the cap and what the
    messages kept whatever leave of its ``whole``. ``compacted``: the messages the engine
    fits, when a summary replaced some of the original ones (they are removed; the summary is
    kept whatever goes)."""
    req, counter, budget, whole = cutting.req, cutting.counter, cutting.budget, cutting.whole
    original, before = req.view.messages, cutting.before
    most = cap(req, cutting.full)
    if most <= 0:  # the ledger off: none of the work below
        return NONE
    compacted = original if compacted is None else compacted
    sent = {id(m) for m in original}
    kept = {id(m) for m in compacted}
    pinned = sum(counter.message(m) for m in compacted if id(m) not in sent)
    view = req.view
    guard = _guard(req, original)
    # Never more than what the instructions, the task and its newest step leave: room kept for
    # the ledger must not cut them (a running task's statement is cut only when they cannot
    # fit whole).
    must = counter.priming + pinned + sum(counter.message(original[i]) for i in guard)
    most = min(most, whole.messages - must)
    if most <= 0:
        return Reserved(tokens=0, guard=guard)
    lead = leading_count(original)
    # The oldest first, as the cut removes them, as far as the cut must go for the budget and
    # the ledger itself: a ledger of messages the cut keeps would be room kept for nothing.
    # (A summary's messages are removed whatever the fit does, and the summary is kept.)
    over = before + pinned - budget.messages + max(0, budget.messages + most - whole.messages)
    candidates, removing = [], 0
    for i in range(lead, len(original)):
        summarized = id(original[i]) not in kept
        if removing >= over and not summarized:
            break
        if i not in guard:
            candidates.append(i)
            removing += counter.message(original[i])
    if not candidates:
        return Reserved(tokens=0, guard=guard)
    text = fitted(extract(original, candidates, view.continuing), most, counter)
    if text is None:
        return Reserved(tokens=0, guard=guard)
    tokens = counter.message(_message(req, text))
    return Reserved(tokens=tokens, guard=guard, indices=candidates, text=text)


def add_ledger(
    cutting: LedgerCut,
    result: Fit,
    reserved: Reserved | None = None,
    front: frozenset[int] = frozenset(),
) -> Fit:
    """``result`` (a fit of the request's messages) with the ledger of what it removed,
    within the room ``reserve`` kept for it (``reserved``; None: the room the fit left) and the
    cap (the reserve's own ledger when the cut removed just what it counted on); it goes
    after ``front`` (``summary_front``), else after the leading instructions.
    Room the fit left beyond what was kept is the conversation's room to grow in: a cut made
    cache-friendly leaves it so the next requests replay the cut, and a ledger filling it
    would have them cut afresh. The room is what the fit left of the cut's ``whole``."""
    req, counter, original = cutting.req, cutting.counter, cutting.req.view.messages
    room = cutting.whole.messages - result.tokens_after
    if reserved is not None:
        room = min(room, reserved.tokens)
    most = min(cap(req, cutting.full), room)
    # What the cut removed; the protected messages it rewrote (a running task's statement cut
    # in its middle) are still there, and say so themselves.
    guard = reserved.guard if reserved is not None else _guard(req, original)
    removed = [i for i in removed_indices(original, result.messages) if i not in guard]
    if not removed or most <= 0:
        return result
    if not req.spec.pricing.exact:
        # An estimated count is calibrated on what the conversation sent; the ledger's prose
        # is a text the calibration has not seen, so it is written to 31/32 of
        # its room (an upstream refused a ledger written to the last token under load).
        most -= most // 32
    if (
        reserved is not None
        and reserved.text is not None
        and removed == reserved.indices
        and reserved.tokens <= most
    ):
        text: str | None = reserved.text  # within reserved.tokens, so within the room
    else:
        text = fitted(extract(original, removed, req.view.continuing), most, counter)
    if text is None:
        return result
    message = _message(req, text)
    cost = counter.message(message)
    if cost > room:
        return result
    at = _where(result.messages, front)
    result.messages = [*result.messages[:at], message, *result.messages[at:]]
    result.tokens_after += cost
    result.actions.append(LEDGER)
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class Reserved:
    """The room ``reserve`` kept (``tokens``), the indices it kept out of the ledger (the
    instructions, the task and its newest step), and the ledger it counted on: of
    ``indices``, ``text``."""

    tokens: int
    guard: set[int] = field(default_factory=set)
    indices: list[int] = field(default_factory=list)
    text: str | None = None


NONE = Reserved(tokens=0)


def _guard(req: WireRequest, original: list[Message]) -> set[int]:
    """The indices of the leading instructions, the task and its newest step."""
    view = req.view
    rules = req.policy.engine.rules
    return set(protected(original, rules, view.atomic_current, view.continuing).indices())


def _message(req: WireRequest, text: str) -> Message:
    return {"role": req.policy.config.summary_role, "content": text}


def summary_front(compacted: list[Message], original: list[Message]) -> frozenset[int]:
    """The ids of what a summary's view (``compacted``) puts before the messages it keeps of
    ``original`` verbatim: the instructions, the summary's layers and the pinned messages
    among them. None when nothing was summarized."""
    if compacted is original:
        return frozenset()
    shift = len(original) - len(compacted)
    start = len(compacted)
    while (
        start > 0 and start - 1 + shift >= 0 and compacted[start - 1] is original[start - 1 + shift]
    ):
        start -= 1
    return frozenset(id(m) for m in compacted[:start])


def _where(kept: list[Message], front: frozenset[int]) -> int:
    """Where the ledger goes among ``kept``: after what is in ``front`` (a summary's, which
    stays as a provider cached it while the ledger changes with each new cut), else right
    after the leading instructions; before the task (a client that reads its newest user
    text as the task still finds its own)."""
    last = max((i for i, m in enumerate(kept) if id(m) in front), default=-1)
    return last + 1 if last >= 0 else leading_count(kept)
