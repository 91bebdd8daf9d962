"""A differential check of the planner: the engine's fit and the proxy's planner run over the
bench's conversations, at several budgets and policies, one digest printed per case and a total
digest of every planned body, message list and action. Run on two trees (``PYTHONPATH`` at each):
a refactor that keeps the planner's behaviour prints the same lines.

    python -m bench.planner_digest [--verbose]

What is run, in process (nothing is sent anywhere):

- the engine (strategies/engine.py) over agent conversations (bench/conversations.py), the five
  families' conversations (bench/families.py), the agent-sized steps (bench/agent_sized.py) and
  the fidelity cases (bench/fidelity_cases.py), at shares of their size, under the default
  policy and its variants (recall, repair, no cache grid, summarize with a deterministic
  summarizer), and with the request's modes (a running task, pins, a cut share, a prefix to
  keep, the newest step cut or not);
- the planner (proxy/request/planning/) over growing conversations request by request, in all
  three formats, as the request path plans them (sticky replays, deep cuts, ledgers, summaries
  by a deterministic summarizer or none), then the overflow retry's entry at a smaller budget.

A case that raises prints its error's type and message in place of its result.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import orjson
from compactbench.dsl import DifficultyLevel
from starlette.datastructures import Headers

from bench import agent_sized, families
from bench.conversations import agent_conversation
from bench.fidelity_cases import cases as fidelity_cases
from proxy.config.settings import load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.errors import ProxyError
from proxy.formats import FORMATS
from proxy.request.conversations import PrefixTracker
from proxy.request.kept_prefix import see_prefix
from proxy.request.planning.planner import Planner
from proxy.request.recall import RecallMemory
from proxy.request.sticky_cuts import CutMemory
from proxy.stores import open_store
from proxy.summaries import Compactor
from proxy.summaries.llm import LLMSummarizer, Target
from proxy.windows.models import build_models
from proxy.windows.tokenizers import text_tokens
from strategies import engine
from strategies.engine import DEFAULT_POLICY, Fit, Policy
from strategies.errors import ContextError, DoesNotFit
from strategies.messages import Message
from strategies.tokens import ChatCounter, Counter, count_prompt

SHARES = (0.95, 0.7, 0.45, 0.25, 0.1)
MODEL = "digest-model"
APIS = ["chat_completions", "responses", "messages"]


class Summaries:
    """A deterministic summarizer for the engine's ``summarize`` strategy: the block's size
    and a digest of its messages, cut to the limit."""

    def summarize(self, messages: Sequence[Message], limit: int) -> Message:
        h = hashlib.blake2b(orjson.dumps(list(messages)), digest_size=8).hexdigest()
        words = " ".join(f"w{k}" for k in range(max(0, min(limit // 2, 40))))
        return {"role": "user", "content": f"[summary {len(messages)} {h}] {words}"}


class LocalSummarizer(LLMSummarizer):
    """The planner's summarizer, with no model: a text made of the messages it is given."""

    async def complete(
        self, messages: list[Message], target: Target, max_tokens: int, timeout: float
    ) -> str:
        self.calls += 1
        h = hashlib.blake2b(orjson.dumps(messages), digest_size=8).hexdigest()
        return f"Summary {h}: " + " ".join(f"point{k}" for k in range(min(60, max_tokens // 4)))


def _policies() -> list[tuple[str, Policy]]:
    return [
        ("default", DEFAULT_POLICY),
        ("recall", Policy(recall=True)),
        ("repair", Policy(repair_tool_calls=True)),
        ("no-grid", Policy(cache_cut_share=0.0, standing_share=0.0, ledger_share=0.0)),
        ("summarize", Policy(history_strategy="summarize", history_options={})),
        ("drop-turns", Policy(history_options={"unit": "message"})),
    ]


def _conversations(counter: Counter) -> Iterator[tuple[str, list[Message]]]:
    for size, seed in ((3000, 1), (9000, 2), (20000, 3)):
        yield f"agent{size}", agent_conversation(size, counter, seed)
    rng = random.Random(5)
    for name in ("chat", "agent", "rag", "multimodal", "cjk"):
        conversation = getattr(families, name)(rng)
        for k in (len(conversation) // 2, len(conversation) - 1):
            yield f"family-{name}-{k}", conversation[k]
    for seed in (1, 2, 3):
        yield f"harsh-{seed}", harsh(seed)
    for n, msgs in enumerate(agent_sized.steps(3)[::7]):
        yield f"agent-sized-{n}", msgs
    for case in fidelity_cases(1, (DifficultyLevel.HARD,), 1)[:8]:
        yield f"fidelity-{case.case_id}", case.messages + list(_take(case.growth(), 24))


def harsh(seed: int) -> list[Message]:
    """A tool loop with what the compaction passes and the last resorts act on: pretty JSON
    outputs, long logs with error lines, repeated reminders, re-attached tool output, long user
    texts, a call left unanswered, and a newest step with one very large output."""
    rng = random.Random(seed)
    words = families.FILLER
    msgs: list[Message] = [
        {"role": "system", "content": "You are a coding agent. " * 20},
        {"role": "user", "content": "Task: " + " ".join(rng.choice(words) for _ in range(400))},
    ]
    for step in range(14):
        call = f"call_{seed}_{step}"
        name = rng.choice(("read_file", "run_tests", "search"))
        fn = {"name": name, "arguments": f'{{"path": "src/m{step}.py"}}'}
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call, "type": "function", "function": fn}],
            }
        )
        if step == 5:
            continue  # a call left unanswered (repair_tool_calls adds its result)
        if name == "read_file":
            doc = {"path": f"src/m{step}.py", "lines": [f"line {k} " * 3 for k in range(60)]}
            output = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
        else:
            lines = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(120)]
            for k in range(0, 120, 17):
                lines[k] = f"ERROR: test_{step}_{k} failed: AssertionError: {k} != {k + 1}"
            output = "\n".join(lines)
        msgs.append({"role": "tool", "tool_call_id": call, "content": output})
        if step % 3 == 1:
            reminder = f"The task tools haven't been used recently. Step {step}."
            msgs.append({"role": "system", "content": reminder})
        if step == 7:
            read = "Called the Read tool with the following input: {}\n" + "x = 1\n" * 200
            msgs.append({"role": "system", "content": read})
        if step % 5 == 4:
            text = " ".join(rng.choice(words) for _ in range(700))
            msgs.append({"role": "user", "content": f"Also note: {text}"})
    last = f"call_{seed}_last"
    fn = {"name": "run_tests", "arguments": "{}"}
    msgs.append(
        {
            "role": "assistant",
            "content": "Running the suite.",
            "tool_calls": [{"id": last, "type": "function", "function": fn}],
        }
    )
    log = [f"tests/test_{k}.py::case PASSED {' '.join(words[k % 20 :][:8])}" for k in range(900)]
    for k in range(50, 900, 97):
        log[k] = f"tests/test_{k}.py::case FAILED Traceback: ValueError: bad value {k}"
    msgs.append({"role": "tool", "tool_call_id": last, "content": "\n".join(log)})
    return msgs


def _fit(**fields: Any) -> Fit:
    """The engine's fit of ``fields``: one request object (``FitRequest``) where the engine
    takes one, else its keyword arguments (the tree before #57), so both trees run this."""
    request = getattr(engine, "FitRequest", None)
    if request is None:
        return engine.fit(**fields)  # type: ignore[call-arg]
    return engine.fit(request(**fields))


def _longer_than(n: int) -> Callable[[Sequence[Message]], bool]:
    """A prefix check that keeps a result of more than ``n`` messages (a stand-in for a
    conversation's last prompt)."""
    return lambda kept: len(kept) > n


def _take(items: Iterator[Message], n: int) -> Iterator[Message]:
    for _ in range(n):
        yield next(items)


def _fit_record(result: Fit) -> Any:
    report = None
    if result.report is not None:
        report = repr(result.report)
    return {
        "messages": result.messages,
        "before": result.tokens_before,
        "after": result.tokens_after,
        "budget": result.budget,
        "actions": result.actions,
        "steps": [(s.name, s.applied, s.tokens_saved) for s in result.steps],
        "report": report,
        "stable": result.cache_stable,
    }


def _error_record(exc: Exception) -> Any:
    out: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, DoesNotFit):
        out.update(block=exc.block_id, tokens=exc.tokens, limit=exc.limit)
    return out


def _digest(record: Any) -> str:
    return hashlib.blake2b(orjson.dumps(record, default=repr), digest_size=12).hexdigest()


def engine_cases() -> Iterator[tuple[str, Any]]:
    """(case, record) for the engine's fit over every conversation, budget and mode."""
    counter = ChatCounter(text_tokens("o200k_base"))
    summaries = Summaries()
    for name, messages in _conversations(counter):
        tokens = count_prompt(counter, messages)
        ids = [id(m) for m in messages]
        users = [id(m) for m in messages if m.get("role") == "user"]
        modes: list[tuple[str, dict[str, Any]]] = [
            ("plain", {}),
            ("running", {"atomic_current": True, "continuing": frozenset(users[-2:-1])}),
            ("pinned", {"pinned": frozenset(ids[1:3])}),
            ("share", {"cut_share": 0.4, "tokens": tokens}),
            ("prefix", {"keeps_prefix": _longer_than(len(messages) // 2)}),
            ("no-newest", {"cut_newest": False, "atomic_current": True}),
        ]
        for share in SHARES:
            budget = max(1, int(tokens * share))
            for policy_name, policy in _policies():
                summarizer = summaries if policy_name == "summarize" else None
                for mode, kwargs in modes:
                    case = f"engine {name} {share} {policy_name} {mode}"
                    try:
                        result = _fit(
                            messages=messages,
                            budget=budget,
                            counter=counter,
                            policy=policy,
                            summarizer=summarizer,
                            **kwargs,
                        )
                        yield case, _fit_record(result)
                    except ContextError as exc:  # a refusal is a result like any other
                        yield case, _error_record(exc)


def _planner_conversations() -> Iterator[tuple[str, list[list[Message]]]]:
    """Growing conversations, the messages of each request in order (chat's shape)."""
    rng = random.Random(11)
    for name in ("chat", "agent", "rag"):
        yield f"family-{name}", getattr(families, name)(rng)
    yield "agent-sized", agent_sized.steps(4)


def _settings(data: str, policy: dict[str, Any], window: int) -> Any:
    return load_settings(
        None,
        upstreams={"demo": {"base_url": "http://127.0.0.1:9/v1", "apis": APIS}},
        models={MODEL: {"context_window": window, "tokenizer": "o200k_base"}},
        policies={"default": {}, "chosen": policy},
        default_policy="chosen",
        data_dir=data,
    )


def _body(fmt: str, messages: list[Message]) -> bytes:
    writer: Callable[[list[dict[str, Any]]], bytes] = {
        "chat": agent_sized.chat_body,
        "responses": agent_sized.responses_body,
        "anthropic": agent_sized.messages_body,
    }[fmt]
    return writer(messages).replace(agent_sized.MODEL.encode(), MODEL.encode())


def _plan_record(plan: Any) -> Any:
    return {
        "body": plan.body.decode("utf-8", "surrogatepass"),
        "before": plan.tokens_before,
        "after": plan.tokens_after,
        "actions": plan.actions,
        "counted": plan.counted,
        "checkpoint": plan.checkpoint,
        "recall": plan.recall,
        "far": plan.far,
        "steps": None
        if plan.fit is None
        else [(s.name, s.applied, s.tokens_saved) for s in plan.fit.steps],
    }


PLANNER_POLICIES: list[tuple[str, dict[str, Any], bool]] = [
    ("default", {}, False),
    ("summaries", {}, True),
    ("recall", {"recall": True, "summarize": False}, False),
    ("rag", families.RAG_POLICY, False),
    ("no-grid", {"cache_cut_share": 0.0, "ledger": 0.0, "summarize": False}, False),
]


async def planner_cases() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    conversations = list(_planner_conversations())
    for policy_name, policy, summarizing in PLANNER_POLICIES:
        for window in (4096, 8192):
            for fmt in ("chat", "responses", "anthropic"):
                for name, conversation in conversations:
                    prefix = f"planner {policy_name} {window} {fmt} {name}"
                    out += await _planned(prefix, conversation, policy, summarizing, window, fmt)
    return out


async def _planned(
    prefix: str,
    conversation: list[list[Message]],
    policy: dict[str, Any],
    summarizing: bool,
    window: int,
    fmt_name: str,
) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cw-digest-") as data:
        settings = _settings(data, {"extends": "default", **policy}, window)
        models = build_models(settings)
        store = open_store(settings)
        summarizer = LocalSummarizer()
        prefixes = PrefixTracker()
        compactor = Compactor(store, summarizer) if summarizing else None
        planner = Planner(
            settings=settings,
            compactor=compactor,
            prefixes=prefixes,
            cuts=CutMemory(),
            recalls=RecallMemory(),
        )
        team = settings.default_team
        who = Principal(team=team, config=settings.teams[team], forward_client_auth=False)
        fmt = FORMATS[fmt_name]
        try:
            for n, messages in enumerate(conversation[::3]):
                raw = _body(fmt_name, messages)
                case = f"{prefix} {n}"
                try:
                    req = build_request(raw, Headers(), settings, models, who, fmt)
                    plan = await planner.plan_first(req, exact=True)
                    out.append((case, _plan_record(plan)))
                    await see_prefix(prefixes, req, plan)
                    if plan.budget is not None and n % 4 == 3:
                        smaller = replace(plan.budget, margin=plan.budget.margin + window // 8)
                        retried = await planner.plan_fitted(req, smaller)
                        out.append((f"{case} retry", _plan_record(retried)))
                except ProxyError as exc:
                    out.append((case, {"error": type(exc).__name__, "message": exc.message}))
                if compactor is not None:
                    await compactor.drain()
                await prefixes.drain()
        finally:
            if compactor is not None:
                await compactor.drain()
            await prefixes.drain()
            await store.close()
    return out


def main(argv: Sequence[str] = ()) -> None:
    verbose = "--verbose" in argv
    logging.getLogger("contextwarden").setLevel(logging.ERROR)
    total = hashlib.blake2b(digest_size=16)
    counts = {"engine": 0, "planner": 0}
    groups: dict[str, Any] = {}
    results = [*engine_cases(), *asyncio.run(planner_cases())]
    for case, record in results:
        line = f"{case} {_digest(record)}"
        kind = case.split(" ", 1)[0]
        counts[kind] += 1
        group = " ".join(case.split(" ")[:3])
        groups.setdefault(group, hashlib.blake2b(digest_size=8)).update(line.encode())
        total.update(line.encode() + b"\n")
        if verbose:
            print(line)
    if not verbose:
        for group, h in groups.items():
            print(f"{group} {h.hexdigest()}")
    print(f"cases: {counts['engine']} engine, {counts['planner']} planner")
    print(f"total {total.hexdigest()}")


if __name__ == "__main__":
    main(sys.argv[1:])
