"""The engine: make a request's messages fit a token budget, under a policy.

    fit(FitRequest(messages=..., budget=..., counter=..., policy=...)) -> Fit
      1. tool-call repair              (opt-in; runs even when the request fits)
      2. fits already?                 -> returned untouched
      3. compaction passes, in order,  each only while still over budget, each reporting savings:
         lossless re-encoding first, then clearing old outputs, then trimming long texts
      4. rules -> blocks -> allocation (tier order; each block's strategy only if it does not fit)
      5. reassembly in conversation order; formatted blocks merged into the system message

The budget covers the messages and the reply priming; tool definitions and the reply reserve are
taken off by the caller. Messages nobody rewrote are returned as the same objects.

The request (``FitRequest``) holds every mode as a field with a default: what must be kept (pins,
a running task), what may be cut and how (the policy, a summarizer, a deeper cut share, the
newest step's last-resort cut) and the sticky state (whether a result keeps the previous
prompt). The plan (``Fit``) lists the steps that ran, by name: repair, reminders, the newest
step's and the task's last-resort cuts, each pass, the recall clearing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from strategies import registry
from strategies.attached import ReattachedClear, stale_reminders
from strategies.base import Strategy
from strategies.blocks import Block, Report, compile_blocks
from strategies.errors import BudgetExceeded
from strategies.ledger import DEFAULT_LEDGER_SHARE
from strategies.light_trim import LightTrim
from strategies.lossless import Lossless
from strategies.messages import (
    RESULT_ROLES,
    Message,
    iter_text,
    last_user_index,
    leading_count,
    role,
)
from strategies.microcompact import CLEARED, ToolResultMicrocompact
from strategies.outputs import output_text
from strategies.prompt_cut import cut_message_middle
from strategies.protected import Protected, protected
from strategies.repair import repair_tool_calls
from strategies.rules import (
    DEFAULT_RULES,
    TIERS,
    Assignment,
    Held,
    Match,
    Rule,
    Running,
    assign,
    pinned_ids,
    reassemble,
    running_task,
)
from strategies.standing import DEFAULT_SHARE, standing_ids
from strategies.step_cut import ERRORS_SHORT, STEP_CUT, Aim, cut_step
from strategies.summarize import Summarizer
from strategies.tokens import Counter, MemoCounter, count_prompt


class Pass(Protocol):
    """A compaction pass: rewrites messages (never drops them) to save tokens."""

    name: str

    def apply(self, messages: Sequence[Message], counter: Counter) -> list[Message]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    rules: tuple[Rule, ...] = DEFAULT_RULES
    history_strategy: str = "truncate_oldest"
    history_options: Mapping[str, Any] = field(default_factory=lambda: {"unit": "turn"})
    passes: tuple[Pass, ...] = (
        Lossless(),
        ToolResultMicrocompact(),
        ReattachedClear(),
        LightTrim(),
    )
    repair_tool_calls: bool = False
    cache_cut_share: float = 0.3
    pins: tuple[Match, ...] = ()  # messages kept verbatim: never dropped, trimmed or summarized
    # User messages that state a standing rule are kept as if pinned, up to this share of the
    # budget (strategies/standing.py); 0: only pins keep them.
    standing_share: float = DEFAULT_SHARE
    # A cut that removes messages forwards a ledger of what they established (the task, rules,
    # decisions, facts, open items, files, errors: strategies/ledger.py), up to this share of
    # the budget; 0: none.
    ledger_share: float = DEFAULT_LEDGER_SHARE
    # Cleared outputs can be recalled (their placeholders name handles): a cut that clears is
    # kept even when it does not keep the previous prompt as its prefix, since a step dropped
    # instead is gone for good (the next requests replay either cut alike: sticky cuts).
    recall: bool = False
    _built: dict[str, Strategy] = field(default_factory=dict, compare=False, repr=False)

    @property
    def history(self) -> Rule:
        """Whatever no rule takes. truncate_oldest cuts it on a grid of ``cache_cut_share`` of
        the request's budget (see TruncateOldest.bind)."""
        options = dict(self.history_options)
        if self.history_strategy == "truncate_oldest" and self.cache_cut_share > 0:
            options.setdefault("grid_share", self.cache_cut_share)
        return Rule(
            id="history",
            match=Match(),
            tier=TIERS["history"],
            strategy=self.history_strategy,
            options=options,
        )

    def strategy(self, rule: Rule) -> Strategy:
        """The rule's strategy, built once for this policy (its options never change)."""
        built = self._built.get(rule.id)
        if built is None:
            options = dict(rule.options)
            gridded = rule.id in GRID_RULES and rule.strategy == "truncate_oldest"
            if gridded and self.cache_cut_share > 0:
                options.setdefault("grid_share", self.cache_cut_share)
            built = self._built[rule.id] = registry.build(rule.strategy, options)
        return built


DEFAULT_POLICY = Policy()
# Rules whose oldest messages go on the cache grid: the current turn (a chat tool loop that
# outgrows the window; the history block and a running task's steps get the grid by their
# own options), so consecutive requests keep their prefix until the loop grows a grid step.
GRID_RULES = ("current",)


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    applied: bool
    tokens_saved: int


@dataclass(slots=True, kw_only=True)
class Fit:
    """The plan of one fit: the messages to forward, their counts, what was done (``actions``,
    a user's words) and the engine's named steps in the order they ran (``steps``: each pass,
    applied or not, with what it saved), the blocks' report when blocks were allocated, and
    whether the result keeps the cache grid (``cache_stable``)."""

    messages: list[Message]
    tokens_before: int
    tokens_after: int
    budget: int
    actions: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    report: Report | None = None
    cache_stable: bool = True

    @property
    def changed(self) -> bool:
        return bool(self.actions)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitRequest:
    """One fit: the messages and the budget they must fit, what must be kept whatever goes,
    what may be cut and how, and the conversation's sticky state. Every mode is a field with
    a default: a request that names none is fitted as a plain chat under the default policy."""

    messages: list[Message]
    # Tokens for the messages and the reply priming (tool definitions and the reply reserve are
    # taken off by the caller).
    budget: int
    counter: Counter  # prices the messages (a MemoCounter is made of it when it is not one)
    tokens: int | None = None  # ``count_prompt(counter, messages)``, when the caller has it

    # What must be kept.
    # ``id()`` of the message objects kept verbatim (not their positions: a position names no
    # message and pins nothing), as the policy's ``pins`` and standing rules are: no pass
    # rewrites them, and their units form a strict block.
    pinned: frozenset[int] = frozenset()
    # The current turn is a running agent task: its task message and newest step go byte for
    # byte, passes rewrite only its completed steps' results, and whole steps go oldest first.
    atomic_current: bool = False
    # ``id()`` of the running turn's user messages that continue its tool loop instead of stating a
    # task (strategies/rules.py: running_task).
    continuing: frozenset[int] = frozenset()

    # What may be cut, and how.
    policy: Policy = DEFAULT_POLICY  # the rules, the compaction passes and the shares
    summarizer: Summarizer | None = None  # for the rules whose strategy is ``summarize``
    cut_share: float | None = None  # deepens the history's cache-grid cut (strategies/cost.py)
    # When what must be kept cannot fit whole, the newest step's largest outputs are cut
    # (strategies/step_cut.py) before a refusal; off for a caller with a fallback of its own.
    cut_newest: bool = True

    # The sticky state: whether a result keeps the conversation's previous forwarded prompt as
    # its prefix. Passes that rewrote older messages so that it does not are undone (unless the
    # policy ``recall``s): a cut on the cache grid keeps the prefix until the next grid step.
    keeps_prefix: Callable[[Sequence[Message]], bool] | None = None


@dataclass(slots=True, kw_only=True)
class _Fitting:
    """A fit in progress: its request, its counter, the ids it keeps verbatim (the request's,
    the policy's pins, the standing rules), the running task, the original messages' count
    (``before``), and the messages as far as the steps so far have brought them, with their
    count, the steps and the actions."""

    request: FitRequest
    counter: MemoCounter
    pinned: frozenset[int]
    run: Running
    before: int
    messages: list[Message]
    tokens: int
    steps: list[Step] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)

    def result(self, stable: bool = True) -> Fit:
        return Fit(
            messages=self.messages,
            tokens_before=self.before,
            tokens_after=self.tokens,
            budget=self.request.budget,
            actions=self.actions,
            steps=self.steps,
            cache_stable=stable,
        )

    def again(self) -> _Fitting:
        """A fresh fit of the same request, from its original messages (the passes made
        again without the rewrites that broke the previous prompt's prefix)."""
        return _Fitting(
            request=self.request,
            counter=self.counter,
            pinned=self.pinned,
            run=self.run,
            before=self.before,
            messages=self.request.messages,
            tokens=self.before,
        )


def fit(request: FitRequest) -> Fit:
    """The request's messages unchanged when they fit its budget, else the conversation made
    to fit: the steps in the module's docstring, each one only while still over the budget.

    What must be kept: the system prompt and the user's current message, the request's
    ``pinned`` messages, the policy's ``pins`` and the user messages that state a standing
    rule (up to the policy's ``standing_share`` of the budget: strategies/standing.py); with
    ``atomic_current``, the running task's statement and newest step (their last resorts:
    ``cut_newest``'s step cut, then the statement's middle cut).

    Raises :class:`strategies.errors.DoesNotFit` when what must be kept cannot fit.
    """
    policy, budget, messages = request.policy, request.budget, request.messages
    counter = request.counter
    if not isinstance(counter, MemoCounter):
        counter = MemoCounter(counter)
    pinned = request.pinned | pinned_ids(messages, policy.pins)
    tokens = request.tokens
    if tokens is None:
        tokens = count_prompt(counter, messages)
    if policy.standing_share > 0 and tokens > budget:
        share, continuing = policy.standing_share, request.continuing
        pinned |= standing_ids(messages, counter, budget, share, continuing)
    run = Running(request.atomic_current, request.continuing)
    first = _Fitting(
        request=request,
        counter=counter,
        pinned=pinned,
        run=run,
        before=tokens,
        messages=messages,
        tokens=tokens,
    )
    result = _fit(first, policy.passes)
    rewrote = any(s.applied and s.name in _pass_names(policy) for s in result.steps)
    keeps_prefix = request.keeps_prefix
    keep = keeps_prefix is None or policy.recall
    if rewrote and not keep and keeps_prefix is not None and not keeps_prefix(result.messages):
        result = _fit(first.again(), ())
    if request.atomic_current and result.actions:
        result.actions += _running_report(messages, result.messages, request.continuing)
    return result


def _running_report(
    messages: Sequence[Message], kept: Sequence[Message], continuing: frozenset[int]
) -> list[str]:
    """What happened inside a running task, in a user's words: how many outputs of its
    completed steps were cleared, and how many steps were dropped whole."""
    task, newest = running_task(messages, leading_count(messages), continuing)
    done = messages[task + 1 : newest]
    left = {id(m) for m in kept}
    dropped = sum(1 for m in done if role(m) == "assistant" and id(m) not in left)
    answered = {m.get("tool_call_id") for m in done if role(m) in RESULT_ROLES}
    originals = {id(m) for m in messages}
    rewritten = [
        m
        for m in kept
        if id(m) not in originals and role(m) in RESULT_ROLES and m.get("tool_call_id") in answered
    ]
    # Cleared (the placeholder stands for it) or compacted (minified, counted, digested).
    cleared = sum(1 for m in rewritten if output_text(m).startswith(CLEARED))
    out = []
    if cleared:
        out.append(f"outputs-cleared {cleared}")
    if len(rewritten) > cleared:
        out.append(f"outputs-compacted {len(rewritten) - cleared}")
    if dropped:
        out.append(f"steps-dropped {dropped}")
    return out


def _pass_names(policy: Policy) -> frozenset[str]:
    return frozenset(p.name for p in policy.passes)


def _fit(f: _Fitting, passes: Sequence[Pass]) -> Fit:
    """The steps of one fit, in order, with ``passes`` as the compaction passes."""
    policy, budget, counter, run = f.request.policy, f.request.budget, f.counter, f.run
    if policy.repair_tool_calls:
        f.messages, repaired = repair_tool_calls(f.messages)
        if repaired:
            f.actions.append("repair_tool_calls")
            saved = f.before - count_prompt(counter, f.messages)
            f.steps.append(Step("repair_tool_calls", True, saved))
            f.tokens = count_prompt(counter, f.messages)
    if f.tokens <= budget:
        return f.result()
    if budget <= counter.priming:
        raise BudgetExceeded(
            f"a budget of {budget} tokens leaves nothing for messages", "request", f.tokens, budget
        )
    kept = _drop_stale(f, protected(f.messages, policy.rules, run.atomic, run.continuing))
    if f.tokens <= budget:
        return f.result(stable=False)
    if f.request.cut_newest:
        _cut_step(f, kept)
    if run.atomic:
        _cut_task(f, kept)
    keep = _kept(kept, run)
    _run_passes(f, passes, keep)
    if policy.recall and passes and f.tokens > budget:
        _clear_deeper(f, keep)
    if f.tokens <= budget:
        return f.result(stable=False)
    rules = (RUNNING_TURN_RULE, _steps_rule(policy), *policy.rules) if run.atomic else policy.rules
    return _allocate(f, rules, keep)


def _drop_stale(f: _Fitting, kept: Protected) -> Protected:
    """The conversation without the reminders a newer one of the same kind repeats (never one
    in the newest step, nor a pinned one); the first thing a conversation over its budget
    loses (strategies/attached.py). What is protected of what is left."""
    messages, pinned = f.messages, f.pinned
    keep = {i for i, m in enumerate(messages) if id(m) in pinned} if pinned else set()
    stale = stale_reminders(messages, keep.union(kept.step))
    if not stale:
        return kept
    gone = set(stale)
    out = [m for i, m in enumerate(messages) if i not in gone]
    saved = sum(f.counter.message(messages[i]) for i in stale)
    f.steps.append(Step("reminders", True, saved))
    f.actions.append(f"reminders-dropped {len(stale)}")
    f.messages, f.tokens = out, f.tokens - saved
    return protected(out, f.request.policy.rules, f.run.atomic, f.run.continuing)


def _kept(kept: Protected, run: Running) -> frozenset[int]:
    """The indices of a chat turn's task and newest step, which the engine holds as one strict
    block (``newest``). A running task (atomic) has its own rule for them (``running-turn``),
    which may cut its statement's middle when nothing else makes room."""
    if run.atomic:
        return frozenset()
    step = frozenset(kept.step)
    return step if kept.task < 0 else step | {kept.task}


# A running task's statement and newest step, whole, before any of the policy's own rules.
RUNNING_TURN_RULE = Rule(
    id="running-turn", match=Match(position="current"), tier=TIERS["core"], strategy="strict"
)
RUNNING_STEPS = "running-steps"


def _steps_rule(policy: Policy) -> Rule:
    """A running task's completed steps: whole steps dropped oldest first, on the cache grid,
    after older turns (they are the task's own context). Their results were cleared first."""
    options: dict[str, Any] = {"unit": "step"}
    if policy.cache_cut_share > 0:
        options["grid_share"] = policy.cache_cut_share
    return Rule(
        id=RUNNING_STEPS,
        match=Match(position="steps"),
        tier=TIERS["core"],
        strategy="truncate_oldest",
        options=options,
    )


def _cut_step(f: _Fitting, kept: Protected) -> None:
    """The newest step's outputs stay verbatim unless the protected messages (the leading
    instructions, the task, the newest step) and the pinned ones cannot fit together: then
    its largest outputs are cut, each to its head, tail and error lines, with a marker that
    says how to get the rest (strategies/step_cut.py), to what they leave. The last resort
    before a refusal (with the task's middle cut after it), never a way to make room for
    older steps."""
    if kept.newest >= kept.size:
        return
    messages, pinned, counter, budget = f.messages, f.pinned, f.counter, f.request.budget
    must = counter.priming + _kept_tokens(messages, kept, pinned, counter)
    if must <= budget:
        return
    indices = [i for i in kept.step if id(messages[i]) not in pinned]
    task = kept.task
    # A running task's statement, when it is cut next (``_cut_task``), shares the cut.
    shares = f.run.atomic and 0 <= task < kept.newest and id(messages[task]) not in pinned
    others = [counter.message(messages[task])] if shares else []
    need = Aim(must - budget, f.request.policy.recall, others)
    cut = cut_step(messages, indices, need, counter)
    if cut is None:
        return
    after = count_prompt(counter, cut.messages)
    f.steps.append(Step(STEP_CUT, True, f.tokens - after))
    if cut.short:  # error lines given up: by how many tokens (a caller may find them)
        f.steps.append(Step(ERRORS_SHORT, False, cut.short))
    f.actions.append(f"{STEP_CUT} {cut.cut}")
    f.messages, f.tokens = cut.messages, after


def _kept_tokens(
    messages: Sequence[Message], kept: Protected, pinned: frozenset[int], counter: Counter
) -> int:
    """What the protected and the pinned messages take, each counted once."""
    protected_ids = set(kept.indices())
    more = [i for i, m in enumerate(messages) if id(m) in pinned and i not in protected_ids]
    return sum(counter.message(messages[i]) for i in (*protected_ids, *more))


def _cut_task(f: _Fitting, kept: Protected) -> None:
    """A running task's statement stays verbatim unless, once steps have begun, the protected
    messages (the leading instructions, the task and its newest step) cannot fit beside it:
    then its middle is cut, with a marker, to what they leave. The last resort before a
    refusal, never a way to make room for older steps."""
    messages, counter, budget = f.messages, f.counter, f.request.budget
    task = kept.task
    if task < 0 or kept.newest >= kept.size or id(messages[task]) in f.pinned:
        return  # no step taken yet: a prompt that does not fit is refused
    must = counter.priming + sum(counter.message(messages[i]) for i in kept.indices())
    if must <= budget:
        return
    cap = counter.message(messages[task]) - (must - budget)
    if cap <= 0:
        return
    cut = cut_message_middle(messages[task], cap, counter)
    if cut is None:
        return
    out = [*messages[:task], cut, *messages[task + 1 :]]
    after = count_prompt(counter, out)
    f.steps.append(Step("task_middle_cut", True, f.tokens - after))
    f.actions.append("task_middle_cut")
    f.messages, f.tokens = out, after


def _clear_deeper(f: _Fitting, keep: frozenset[int]) -> None:
    """Under ``recall``, a cut clears older outputs, the oldest first, down to the newest
    one's, before it drops whole steps: a cleared output can be recalled, a dropped one is
    gone. ``keep``: the newest step and task (never cleared)."""
    start = f.tokens
    # The clearing passes' own steps and actions are not the fit's: one step says it all.
    inner = replace(f, steps=[], actions=[])
    for recent in range(DEEPER_KEEP, 0, -1):
        clearing = ToolResultMicrocompact(keep_recent=recent, handles=True)
        _run_passes(inner, (clearing,), keep)
        if inner.tokens <= f.request.budget:
            break
    f.messages, f.tokens = inner.messages, inner.tokens
    if f.tokens < start:
        f.steps.append(Step("recall_clearing", True, start - f.tokens))
        if ToolResultMicrocompact.name not in f.actions:
            f.actions.append(ToolResultMicrocompact.name)


DEEPER_KEEP = 4  # under recall, the kept outputs are cleared one by one down to the newest


def _run_passes(f: _Fitting, passes: Sequence[Pass], keep: frozenset[int]) -> None:
    """Each of ``passes`` in turn while the fit is over its budget (each a named step,
    applied or not, with what it saved)."""
    # The system prompt, the user's current message and the newest step (``keep``) are never
    # rewritten by a pass. In a running task (atomic) only the results of its completed steps
    # may be: the task and every assistant message go back as they came.
    messages, tokens, budget, counter = f.messages, f.tokens, f.request.budget, f.counter
    run, pinned, steps, actions = f.run, f.pinned, f.steps, f.actions
    lead = leading_count(messages)
    last_user = last_user_index(messages)
    task, newest = (
        running_task(messages, lead, run.continuing) if run.atomic else (len(messages),) * 2
    )
    for compaction in passes:
        if tokens <= budget:
            steps.append(Step(compaction.name, False, 0))
            continue
        rewritten = messages[:lead] + compaction.apply(messages[lead:], counter)
        if last_user >= lead:
            rewritten[last_user] = messages[last_user]
        for i in range(task, len(messages)):
            if i == task or i >= newest or messages[i].get("role") in ("user", "assistant"):
                rewritten[i] = messages[i]
        for i in keep:
            rewritten[i] = messages[i]
        if pinned:
            for i, original in enumerate(messages):
                if id(original) in pinned:
                    rewritten[i] = original
        # The prompt's count is its messages' counts plus the reply priming: only the
        # messages the pass rewrote change it.
        changed = [(a, b) for a, b in zip(messages, rewritten, strict=True) if a is not b]
        after = tokens + sum(counter.message(b) - counter.message(a) for a, b in changed)
        applied = bool(changed)
        steps.append(Step(compaction.name, applied, tokens - after))
        if applied:
            actions.append(compaction.name)
            messages, tokens = rewritten, after
    f.messages, f.tokens = messages, tokens


def _allocate(f: _Fitting, rules: Sequence[Rule], keep: frozenset[int]) -> Fit:
    """The last step: the messages assigned to ``rules``' blocks (and the policy's history),
    each block's strategy applied only if it does not fit, in tier order, and reassembled."""
    messages, counter, request, run = f.messages, f.counter, f.request, f.run
    history = request.policy.history
    assignments = assign(messages, rules, history, Held(f.pinned, keep), run)
    last_user = last_user_index(messages)
    query = "\n".join(iter_text(messages[last_user])) if last_user >= 0 else ""
    blocks = [_block(f, a, query) for a in assignments]
    outputs, report = compile_blocks(blocks, request.budget - counter.priming, counter)
    kept = reassemble(messages, assignments, outputs)
    after = count_prompt(counter, kept)
    actions, steps = f.actions, f.steps
    for entry in report.blocks:
        if entry.label is not None and entry.strategy not in actions:
            actions.append(entry.strategy)
    stable = not any(s.applied for s in steps) and all(
        b.label is None or b.id == "history" for b in report.blocks
    )
    return Fit(
        messages=kept,
        tokens_before=f.before,
        tokens_after=after,
        budget=request.budget,
        actions=actions,
        steps=steps,
        report=report,
        cache_stable=stable,
    )


def _block(f: _Fitting, a: Assignment, query: str) -> Block:
    """The block of assignment ``a``, with its rule's strategy bound to the request's query,
    budget and cut share."""
    request = f.request
    policy, summarizer, budget, cut_share = (
        request.policy,
        request.summarizer,
        request.budget,
        request.cut_share,
    )
    rule = a.rule
    if summarizer is not None and rule.strategy == "summarize":  # the library's own use
        strategy = registry.build(rule.strategy, rule.options, summarizer=summarizer)
    else:
        strategy = policy.strategy(rule)
    bind = getattr(strategy, "bind", None)
    if bind is not None and a.indices:  # the request's context, for a strategy that asks for it
        cut = rule.id in ("history", RUNNING_STEPS, *GRID_RULES) and hasattr(strategy, "grid_share")
        if cut_share is not None and cut:
            strategy = bind(query=query, budget=budget, grid_share=cut_share)
        else:
            strategy = bind(query=query, budget=budget)
    messages = f.messages
    picked = [messages[i] for i in a.indices]
    return Block(
        id=rule.id, messages=picked, tier=rule.tier, strategy=strategy, max_tokens=rule.max_tokens
    )
