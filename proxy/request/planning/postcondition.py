"""The plan's post-condition: what every forwarded plan keeps, checked in one place, before the
request is written.

    violation(req, plan) -> reason | None

- ``protected``: the leading instructions the policy keeps whole, the task and the newest step
  (strategies/protected.py) are the very messages the client sent. A message nobody rewrote is
  the same object, and the format writes it back from its own bytes. The one exception is a
  running task's statement whose middle the engine cut (``task_middle_cut``), and the newest
  step's outputs it cut (``step-outputs-cut``: the same call ids, in the same places, the calls
  untouched): it does those only when the protected messages could not fit whole, as the last
  steps before a refusal.
- ``pairs``: no call without every one of its results, no result without its call.
- ``budget``: the prompt within the budget it was fitted to.
- ``cap``: the prompt (messages and tool definitions) within the team's
  ``max_context_tokens``, a hard cap.

A plan that breaks it is never forwarded: the planner replaces it with the safe plan (the cut
to the full budget: no sticky replay, no deep cut) and counts the fallback
(``plan-fallback <reason>`` in the actions; ``contextwarden_plan_fallbacks_total``). The check
costs a few identity comparisons and one walk over the forwarded messages, and runs only on
plans that changed the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.wire import WireRequest
from strategies.budget import Budget
from strategies.messages import ANSWERING, Message
from strategies.protected import Protected, protected
from strategies.rules import drop_broken_pairs, pairs_whole
from strategies.step_cut import STEP_CUT

MIDDLE_CUT = "task_middle_cut"


def violation(
    req: WireRequest,
    kept: Sequence[Message] | None,
    actions: Sequence[str],
    tokens: int | None,
    budget: Budget | None,
) -> str | None:
    """The first promise a plan breaks, by name; None when it keeps them all. ``kept``: the
    messages it forwards (None, or the request's own: the conversation goes as sent),
    ``tokens`` their count, ``budget`` the budget they were fitted to."""
    sent = req.view.messages
    if kept is None or budget is None or not actions or kept is sent:
        return None
    view = req.view
    guard = protected(sent, req.policy.engine.rules, view.atomic_current, view.continuing)
    step_cut = any(a.startswith(STEP_CUT) for a in actions)
    whole = keeps(sent, kept, guard, MIDDLE_CUT in actions, step_cut)
    if not whole and not unpaired_only(sent, kept, guard):
        return "protected"
    if not pairs_whole(kept):
        return "pairs"
    if tokens is not None and tokens > budget.messages:
        return "budget"
    if req.cap is not None and (tokens or 0) + budget.tools > req.cap:
        return "cap"
    return None


def _output_cut(mine: Message, theirs: Message) -> bool:
    """Whether ``mine`` is ``theirs``, a tool output, with only its content changed."""
    if theirs.get("role") not in ANSWERING:
        return False
    changed = {
        k
        for k in mine.keys() | theirs.keys()
        if mine.get(k) is not theirs.get(k) and mine.get(k) != theirs.get(k)
    }
    return changed <= {"content"} and mine.get("tool_call_id") == theirs.get("tool_call_id")


def unpaired_only(sent: Sequence[Message], kept: Sequence[Message], guard: Protected) -> bool:
    """Whether every protected message ``kept`` lacks is one the client's own conversation left
    unpaired (a result with no call before it, a call whose results stop short): no plan can
    forward those as they are, and the upstream would refuse them. Asked only when ``keeps``
    fails, so a valid conversation pays nothing for it."""
    valid = {id(m) for m in drop_broken_pairs(list(sent))}
    present = {id(m) for m in kept}
    missing = [sent[i] for i in guard.indices() if id(sent[i]) not in present]
    return all(id(m) not in valid for m in missing)


def keeps(
    sent: Sequence[Message],
    kept: Sequence[Message],
    guard: Protected,
    middle_cut: bool,
    step_cut: bool = False,
) -> bool:
    """Whether ``kept`` ends with the newest step as sent and holds the task and the leading
    instructions, the same objects (``step_cut``: or, for the step's outputs, an output of the
    same call with its text cut)."""
    tail = guard.size - guard.newest
    if tail > len(kept):
        return False
    for mine, theirs in zip(kept[len(kept) - tail :], sent[guard.newest :], strict=True):
        if mine is not theirs and not (step_cut and _output_cut(mine, theirs)):
            return False
    others = [sent[i] for i in guard.leading]
    if guard.task >= 0 and guard.task < guard.newest and not middle_cut:
        others.append(sent[guard.task])
    if not others:
        return True
    present = {id(m) for m in kept}
    return all(id(m) in present for m in others)
