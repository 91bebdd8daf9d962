"""The engine: make a request's messages fit a token budget, under a policy.

    fit(messages, budget, counter, policy)
      1. tool-call repair              (opt-in; runs even when the request fits)
      2. fits already?                 -> returned untouched
      3. compaction passes, in order,  each only while still over budget, each reporting savings:
         lossless re-encoding first, then clearing old outputs, then trimming long texts
      4. rules -> blocks -> allocation (tier order; each block's strategy only if it does not fit)
      5. reassembly in conversation order; formatted blocks merged into the system message

The budget covers the messages and the reply priming; tool definitions and the reply reserve are
taken off by the caller. Messages nobody rewrote are returned as the same objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    Match,
    Rule,
    assign,
    pinned_ids,
    reassemble,
    running_task,
)
from strategies.standing import DEFAULT_SHARE, standing_ids
from strategies.step_cut import ERRORS_SHORT, STEP_CUT, cut_step
from strategies.summarize import Summarizer
from strategies.tokens import Counter, MemoCounter, count_prompt


class Pass(Protocol):
    """A compaction pass: rewrites messages (never drops them) to save tokens."""

    name: str

    def apply(self, messages: Sequence[Message], counter: Counter) -> list[Message]: ...


@dataclass(frozen=True, slots=True)
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
        return Rule("history", Match(), TIERS["history"], self.history_strategy, options)

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
class Running:
    """Whether the current turn is a running task kept by its statement and newest step
    (``atomic``), and which of its user messages only continue its loop (ids)."""

    atomic: bool = False
    continuing: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    applied: bool
    tokens_saved: int


@dataclass(slots=True)
class Fit:
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


def fit(
    messages: list[Message],
    budget: int,
    counter: Counter,
    policy: Policy = DEFAULT_POLICY,
    summarizer: Summarizer | None = None,
    atomic_current: bool = False,
    pinned: frozenset[int] = frozenset(),
    cut_share: float | None = None,
    keeps_prefix: Callable[[Sequence[Message]], bool] | None = None,
    continuing: frozenset[int] = frozenset(),
    tokens: int | None = None,
    cut_newest: bool = True,
) -> Fit:
    """``messages`` unchanged when they fit ``budget``, else the conversation made to fit.

    ``tokens``: ``count_prompt(counter, messages)``, when the caller has it already.

    ``cut_newest``: when the protected messages (below) cannot fit whole, the newest step's
    largest outputs are cut to a head, a tail and their error lines before the fit gives up
    (strategies/step_cut.py). A caller with a fallback of its own (a larger budget to try
    next) turns it off, so that the step is cut only as the last resort.

    ``atomic_current``: the current turn is a running agent task, as the wire formats whose
    APIs bind reasoning or thinking to its exact items send it. Its task message and newest
    step (the last assistant message with its calls and their results) are kept byte for
    byte; of its completed steps, passes may rewrite only the results (cleared oldest first),
    and whole steps go oldest first, on the cache grid. Assistant messages are never
    rewritten.

    ``continuing`` (message ids): user messages of the running turn that continue its tool loop
    instead of stating a task (see :func:`strategies.rules.running_task`).

    ``pinned`` (message ids) and the policy's ``pins`` name messages kept verbatim: no pass
    rewrites them, and their units form a strict block. So do user messages that state a
    standing rule, up to the policy's ``standing_share`` of the budget (strategies/standing.py).
    ``cut_share`` deepens the history's
    cache-grid cut for this request (strategies/cost.py: cut_share).

    ``keeps_prefix`` says whether a result keeps the conversation's previous forwarded prompt as
    its prefix. When the compaction passes rewrote older messages so that it does not (and the
    policy does not ``recall``), the fit is made again without them: a cut on the cache grid
    keeps the prefix until the next grid step, while a rewrite in place re-bills the whole
    prompt after it on every request. Under ``recall`` a cut clears outputs (recallable)
    rather than dropping steps (gone).

    Raises :class:`strategies.errors.DoesNotFit` when what must be kept (the system prompt, the
    user's current message, pinned messages) cannot fit.
    """
    if not isinstance(counter, MemoCounter):
        counter = MemoCounter(counter)
    pinned = pinned | pinned_ids(messages, policy.pins)
    run = Running(atomic_current, continuing)
    if tokens is None:
        tokens = count_prompt(counter, messages)
    if policy.standing_share > 0 and tokens > budget:
        pinned |= standing_ids(messages, counter, budget, policy.standing_share, continuing)
    args = (
        messages,
        tokens,
        budget,
        counter,
        policy,
        summarizer,
        run,
        pinned,
        cut_share,
        cut_newest,
    )
    result = _fit(*args, policy.passes)
    rewrote = any(s.applied and s.name in _pass_names(policy) for s in result.steps)
    keep = keeps_prefix is None or policy.recall
    if rewrote and not keep and keeps_prefix is not None and not keeps_prefix(result.messages):
        result = _fit(*args, ())
    if atomic_current and result.actions:
        result.actions += _running_report(messages, result.messages, continuing)
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


def _fit(
    messages: list[Message],
    before: int,
    budget: int,
    counter: MemoCounter,
    policy: Policy,
    summarizer: Summarizer | None,
    run: Running,
    pinned: frozenset[int],
    cut_share: float | None,
    cut_newest: bool,
    passes: Sequence[Pass],
) -> Fit:
    current, actions, steps = messages, [], []
    if policy.repair_tool_calls:
        current, repaired = repair_tool_calls(messages)
        if repaired:
            actions.append("repair_tool_calls")
            steps.append(Step("repair_tool_calls", True, before - count_prompt(counter, current)))
    tokens = count_prompt(counter, current) if actions else before
    if tokens <= budget:
        return Fit(current, before, tokens, budget, actions, steps)
    if budget <= counter.priming:
        raise BudgetExceeded(
            f"a budget of {budget} tokens leaves nothing for messages", "request", tokens, budget
        )
    kept = protected(current, policy.rules, run.atomic, run.continuing)
    current, tokens, kept = _drop_stale(
        current, tokens, counter, policy, run, pinned, kept, steps, actions
    )
    if tokens <= budget:
        return Fit(current, before, tokens, budget, actions, steps, cache_stable=False)
    if cut_newest:
        current, tokens = _cut_step(
            current,
            tokens,
            budget,
            counter,
            steps,
            actions,
            kept,
            pinned,
            policy.recall,
            run.atomic,
        )
    if run.atomic:
        current, tokens = _cut_task(current, tokens, budget, counter, steps, actions, kept, pinned)
    keep = _kept(kept, run)
    current, tokens = _run_passes(
        current, tokens, budget, counter, passes, steps, actions, run, pinned, keep
    )
    if policy.recall and passes and tokens > budget:
        current, tokens = _clear_deeper(
            current, tokens, budget, counter, steps, actions, run, pinned, keep
        )
    if tokens <= budget:
        return Fit(current, before, tokens, budget, actions, steps, cache_stable=False)
    rules = (RUNNING_TURN_RULE, _steps_rule(policy), *policy.rules) if run.atomic else policy.rules
    return _allocate(
        current,
        before,
        budget,
        counter,
        policy,
        rules,
        summarizer,
        actions,
        steps,
        pinned,
        cut_share,
        run,
        keep,
    )


def _drop_stale(
    messages: list[Message],
    tokens: int,
    counter: Counter,
    policy: Policy,
    run: Running,
    pinned: frozenset[int],
    kept: Protected,
    steps: list[Step],
    actions: list[str],
) -> tuple[list[Message], int, Protected]:
    """The conversation without the reminders a newer one of the same kind repeats (never one
    in the newest step, nor a pinned one); the first thing a conversation over its budget
    loses (strategies/attached.py)."""
    keep = {i for i, m in enumerate(messages) if id(m) in pinned} if pinned else set()
    stale = stale_reminders(messages, keep.union(kept.step))
    if not stale:
        return messages, tokens, kept
    gone = set(stale)
    out = [m for i, m in enumerate(messages) if i not in gone]
    saved = sum(counter.message(messages[i]) for i in stale)
    steps.append(Step("reminders", True, saved))
    actions.append(f"reminders-dropped {len(stale)}")
    return out, tokens - saved, protected(out, policy.rules, run.atomic, run.continuing)


def _kept(kept: Protected, run: Running) -> frozenset[int]:
    """The indices of a chat turn's task and newest step, which the engine holds as one strict
    block (``newest``). A running task (atomic) has its own rule for them (``running-turn``),
    which may cut its statement's middle when nothing else makes room."""
    if run.atomic:
        return frozenset()
    step = frozenset(kept.step)
    return step if kept.task < 0 else step | {kept.task}


# A running task's statement and newest step, whole, before any of the policy's own rules.
RUNNING_TURN_RULE = Rule("running-turn", Match(position="current"), TIERS["core"], "strict")
RUNNING_STEPS = "running-steps"


def _steps_rule(policy: Policy) -> Rule:
    """A running task's completed steps: whole steps dropped oldest first, on the cache grid,
    after older turns (they are the task's own context). Their results were cleared first."""
    options: dict[str, Any] = {"unit": "step"}
    if policy.cache_cut_share > 0:
        options["grid_share"] = policy.cache_cut_share
    return Rule(RUNNING_STEPS, Match(position="steps"), TIERS["core"], "truncate_oldest", options)


def _cut_step(
    messages: list[Message],
    tokens: int,
    budget: int,
    counter: Counter,
    steps: list[Step],
    actions: list[str],
    kept: Protected,
    pinned: frozenset[int],
    handles: bool,
    atomic: bool,
) -> tuple[list[Message], int]:
    """The newest step's outputs stay verbatim unless the protected messages (the leading
    instructions, the task, the newest step) and the pinned ones cannot fit together: then
    its largest outputs are cut, each to its head, tail and error lines, with a marker that
    says how to get the rest (strategies/step_cut.py), to what they leave. The last resort
    before a refusal (with the task's middle cut after it), never a way to make room for
    older steps."""
    if kept.newest >= kept.size:
        return messages, tokens
    must = counter.priming + _kept_tokens(messages, kept, pinned, counter)
    if must <= budget:
        return messages, tokens
    indices = [i for i in kept.step if id(messages[i]) not in pinned]
    task = kept.task
    # A running task's statement, when it is cut next (``_cut_task``), shares the cut.
    shares = atomic and 0 <= task < kept.newest and id(messages[task]) not in pinned
    others = [counter.message(messages[task])] if shares else []
    cut = cut_step(messages, indices, must - budget, counter, handles, others)
    if cut is None:
        return messages, tokens
    after = count_prompt(counter, cut.messages)
    steps.append(Step(STEP_CUT, True, tokens - after))
    if cut.short:  # error lines given up: by how many tokens (a caller may find them)
        steps.append(Step(ERRORS_SHORT, False, cut.short))
    actions.append(f"{STEP_CUT} {cut.cut}")
    return cut.messages, after


def _kept_tokens(
    messages: Sequence[Message], kept: Protected, pinned: frozenset[int], counter: Counter
) -> int:
    """What the protected and the pinned messages take, each counted once."""
    protected_ids = set(kept.indices())
    more = [i for i, m in enumerate(messages) if id(m) in pinned and i not in protected_ids]
    return sum(counter.message(messages[i]) for i in (*protected_ids, *more))


def _cut_task(
    messages: list[Message],
    tokens: int,
    budget: int,
    counter: Counter,
    steps: list[Step],
    actions: list[str],
    kept: Protected,
    pinned: frozenset[int],
) -> tuple[list[Message], int]:
    """A running task's statement stays verbatim unless, once steps have begun, the protected
    messages (the leading instructions, the task and its newest step) cannot fit beside it:
    then its middle is cut, with a marker, to what they leave. The last resort before a
    refusal, never a way to make room for older steps."""
    task = kept.task
    if task < 0 or kept.newest >= kept.size or id(messages[task]) in pinned:
        return messages, tokens  # no step taken yet: a prompt that does not fit is refused
    must = counter.priming + sum(counter.message(messages[i]) for i in kept.indices())
    if must <= budget:
        return messages, tokens
    cap = counter.message(messages[task]) - (must - budget)
    if cap <= 0:
        return messages, tokens
    cut = cut_message_middle(messages[task], cap, counter)
    if cut is None:
        return messages, tokens
    out = [*messages[:task], cut, *messages[task + 1 :]]
    after = count_prompt(counter, out)
    steps.append(Step("task_middle_cut", True, tokens - after))
    actions.append("task_middle_cut")
    return out, after


def _clear_deeper(
    messages: list[Message],
    tokens: int,
    budget: int,
    counter: Counter,
    steps: list[Step],
    actions: list[str],
    run: Running,
    pinned: frozenset[int],
    keep: frozenset[int] = frozenset(),
) -> tuple[list[Message], int]:
    """Under ``recall``, a cut clears older outputs, the oldest first, down to the newest
    one's, before it drops whole steps: a cleared output can be recalled, a dropped one is
    gone. ``keep``: the newest step and task (never cleared)."""
    start = tokens
    made: list[Step] = []
    for recent in range(DEEPER_KEEP, 0, -1):
        clearing = ToolResultMicrocompact(keep_recent=recent, handles=True)
        messages, tokens = _run_passes(
            messages, tokens, budget, counter, (clearing,), made, [], run, pinned, keep
        )
        if tokens <= budget:
            break
    if tokens < start:
        steps.append(Step("recall_clearing", True, start - tokens))
        if ToolResultMicrocompact.name not in actions:
            actions.append(ToolResultMicrocompact.name)
    return messages, tokens


DEEPER_KEEP = 4  # under recall, the kept outputs are cleared one by one down to the newest


def _run_passes(
    messages: list[Message],
    tokens: int,
    budget: int,
    counter: Counter,
    passes: Sequence[Pass],
    steps: list[Step],
    actions: list[str],
    run: Running = Running(),
    pinned: frozenset[int] = frozenset(),
    keep: frozenset[int] = frozenset(),
) -> tuple[list[Message], int]:
    # The system prompt, the user's current message and the newest step (``keep``) are never
    # rewritten by a pass. In a running task (atomic) only the results of its completed steps
    # may be: the task and every assistant message go back as they came.
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
    return messages, tokens


def _allocate(
    messages: list[Message],
    before: int,
    budget: int,
    counter: Counter,
    policy: Policy,
    rules: Sequence[Rule],
    summarizer: Summarizer | None,
    actions: list[str],
    steps: list[Step],
    pinned: frozenset[int] = frozenset(),
    cut_share: float | None = None,
    run: Running = Running(),
    keep: frozenset[int] = frozenset(),
) -> Fit:
    assignments = assign(messages, rules, policy.history, pinned, run.atomic, run.continuing, keep)
    last_user = last_user_index(messages)
    query = "\n".join(iter_text(messages[last_user])) if last_user >= 0 else ""
    blocks = [
        _block(a, messages, policy, summarizer, query, budget, cut_share) for a in assignments
    ]
    outputs, report = compile_blocks(blocks, budget - counter.priming, counter)
    kept = reassemble(messages, assignments, outputs)
    after = count_prompt(counter, kept)
    for entry in report.blocks:
        if entry.label is not None and entry.strategy not in actions:
            actions.append(entry.strategy)
    stable = not any(s.applied for s in steps) and all(
        b.label is None or b.id == "history" for b in report.blocks
    )
    return Fit(kept, before, after, budget, actions, steps, report, stable)


def _block(
    a: Assignment,
    messages: Sequence[Message],
    policy: Policy,
    summarizer: Summarizer | None,
    query: str,
    budget: int,
    cut_share: float | None = None,
) -> Block:
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
    picked = [messages[i] for i in a.indices]
    return Block(rule.id, picked, rule.tier, strategy, rule.max_tokens)
