"""Fidelity: what a model still sees of a conversation after the proxy trimmed it two and three
times (``python -m bench --only fidelity``; issue #52).

The conversations (bench/fidelity_cases.py) are CompactBench cases generated with the
``compactbench`` package from our own templates in its DSL, in its families (buried constraint,
decision override, entity confusion, reference resolution), at several seeds, hard and elite,
and multi-needle haystacks from ``hard-needle`` in a tool output and a user turn. Each is sent
through the real proxy at its defaults (in process, the demo upstream behind it), resent whole
as it grows, one request per user turn, with a pause between requests for the summaries the
proxy makes in the background. The model's window is set so that the budget (the window less
the reply's 256 tokens and the safety margin) is a third, then a half, of the conversation
before it grows; past its end the conversation grows by off-topic turns and CompactBench's
continuation prompts until the proxy has cut it three times.

A trim cycle is a cut: a request whose forwarded messages are trimmed and do not continue the
previous request's forwarded messages (the first trim, and every re-cut after it; a request
that only appends to a sticky cut continues its cycle). Everything the items check is said
before the first cut (2.4k tokens of conversation at hard, 3.2k at elite; the checked turns
within the first third). The judge reads the request forwarded at the second and at the third
cut, right after it, as CompactBench scores right after each compaction (the request where the
least of the conversation is verbatim), summaries included, with CompactBench's checks
(``run_check``) and weights (``WEIGHTS``): the share of the weighted items whose text is there.
A decision that was replaced counts as kept only when its replacement is there; the old one
there without it is counted apart ("replaced decision shown alone").

Arms: the proxy with the summarizer that remembers nothing (the demo upstream's scripted
summary: the floor by construction), the proxy whose summarizer fails (truncation, the other
floor), the proxy with a real summarizer when ``--summarizer-url`` names one; and beside them,
at the first arm's points and on the same budget (``x-contextwarden-budget``), the controls:
truncate-last-n (the system prompt and the newest whole messages that fit, counted as the
engine counts), an empty artifact (the system prompt and the last user turn) and everything
(the conversation untrimmed; 1.0 by construction of the cases). Compression is the forwarded
tokens over the conversation's, at the same points. The proxy's background summaries race
the next request, so a run's points move by a request or two from run to run.
"""

from __future__ import annotations

import io
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, redirect_stdout
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import httpx
from compactbench.dsl import DifficultyLevel
from compactbench.scoring.checks import contains_normalized, run_check
from compactbench.scoring.scorer import WEIGHTS

from bench.fidelity_cases import Case, Message, cases, count, text_of
from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream

SHARES = ((1 / 3, "1/3"), (1 / 2, "1/2"))
CYCLES = (2, 3)
MAX_TOKENS = 256
MARGIN = 16  # the default safety_margin_tokens: budget = window - max_tokens - margin
THINK_SECONDS = 0.05  # between requests, as bench/summaries.py: background summaries land
GROWTH = 4  # a conversation grows to 4x its base at most while waiting for its third cut
WORKERS = 8
NOTHING = "proxy, summarizer remembers nothing"
FAILING = "proxy, summarizer fails"
FIRST_SIGHT = "proxy, first sight"
CONFIGURED = "proxy, configured summarizer"
TRUNCATE = "truncate-last-n, same budget"
EMPTY = "empty artifact (system + last user turn)"
EVERYTHING = "everything (untrimmed)"
ALL = "all families"


@dataclass(frozen=True, kw_only=True)
class Summarizer:
    """A real model for the summaries: an OpenAI-compatible base URL, the model's name there
    and the variable that holds its key (any value for a local server)."""

    url: str
    model: str
    key_env: str = "OPENAI_API_KEY"


@dataclass(frozen=True, kw_only=True)
class Job:
    case: Case
    share: str
    model: str
    window: int


@dataclass(frozen=True, kw_only=True)
class Point:
    """The request at a cut: what was sent, what the upstream received, the budget."""

    sent: list[Message]
    forwarded: list[Message]
    budget: int


@dataclass(kw_only=True)
class Score:
    kept: float
    replaced_alone: int
    replaced: int
    compression: float


@dataclass
class Tally:
    """Scores of one family and arm, by cycle and window share."""

    scores: dict[tuple[int, str], list[Score]] = field(default_factory=dict)
    missing: int = 0

    def add(self, cycle: int, share: str, score: Score | None) -> None:
        if score is None:
            self.missing += 1
        else:
            self.scores.setdefault((cycle, share), []).append(score)


def judge(case: Case, messages: list[Message]) -> tuple[float, int, int]:
    """Weighted share of ``case``'s items visible in ``messages``; replaced decisions shown
    without their replacement; replaced decisions checked."""
    text = "\n".join(text_of(m) for m in messages)
    total = weight_sum = 0.0
    alone = replaced = 0
    for item in case.items:
        weight = WEIGHTS.get(item.item_type, 1.0)
        score = run_check(item.expected, text)
        old = item.expected.get("replaces")
        if isinstance(old, str):
            replaced += 1
            alone += score < 1.0 and contains_normalized(old, text) == 1.0
        total += weight * score
        weight_sum += weight
    return total / weight_sum, alone, replaced


def score(case: Case, point: Point, messages: list[Message]) -> Score:
    kept, alone, replaced = judge(case, messages)
    compression = count(messages) / count(point.sent)
    return Score(kept=kept, replaced_alone=alone, replaced=replaced, compression=compression)


def truncate_last_n(sent: list[Message], budget: int) -> list[Message]:
    """The system prompt and the newest whole messages that fit ``budget`` (a tool result
    is never kept without its call)."""
    system, rest = sent[:1], sent[1:]
    used, start = count(system), len(rest)
    while start > 0 and used + count(rest[start - 1 : start]) <= budget:
        start -= 1
        used += count(rest[start : start + 1])
    while start < len(rest) and rest[start]["role"] == "tool":
        start += 1
    return system + rest[start:]


def empty_artifact(sent: list[Message]) -> list[Message]:
    return [sent[0], sent[-1]]


def conversation(case: Case) -> Iterator[list[Message]]:
    """Each request of ``case``: the conversation up to each user turn, growing past its base
    up to ``GROWTH`` times its size."""
    limit = GROWTH * count(case.messages)
    messages: list[Message] = []
    for message in chain(case.messages, case.growth()):
        messages.append(message)
        if message["role"] == "user":
            yield list(messages)
        if len(messages) > len(case.messages) and count(messages) > limit:
            return


def forwarded_of(received: list[dict[str, Any]], model: str) -> list[Message]:
    for payload in reversed(received):
        if payload.get("model") == model:
            return list(payload["messages"])
    raise RuntimeError(f"the upstream received nothing for {model}")


def drive(
    job: Job, url: str, received: list[dict[str, Any]], first_sight: bool = False
) -> dict[int, Point]:
    """Send ``job``'s conversation request by request; the points at the cycles wanted. With
    ``first_sight`` each request comes from a caller of its own (a credential never seen), so
    the proxy meets every request as it would after a restart or on a replica without the
    shared store: no checkpoint, no sticky cut, no summary of its own to reuse."""
    points: dict[int, Point] = {}
    previous: list[Message] | None = None
    cuts = 0
    with httpx.Client(timeout=120) as client:
        for n, sent in enumerate(conversation(job.case)):
            body = {"model": job.model, "messages": sent, "max_tokens": MAX_TOKENS}
            headers = (
                {"authorization": f"Bearer first-sight-{job.model}-{n}"} if first_sight else {}
            )
            response = client.post(f"{url}/v1/chat/completions", json=body, headers=headers)
            response.raise_for_status()
            forwarded = forwarded_of(received, job.model)
            continues = previous is not None and forwarded[: len(previous)] == previous
            if forwarded != sent and not continues:
                cuts += 1
                if cuts in CYCLES:
                    budget = int(response.headers["x-contextwarden-budget"])
                    points[cuts] = Point(sent=sent, forwarded=forwarded, budget=budget)
            if cuts >= max(CYCLES):
                break
            previous = forwarded
            time.sleep(THINK_SECONDS)
    return points


def run_arm(
    jobs: list[Job],
    *,
    fail: bool = False,
    summarizer: Summarizer | None = None,
    first_sight: bool = False,
) -> list[dict[int, Point]]:
    """Every job through one proxy and one demo upstream, ``WORKERS`` conversations at once."""
    upstream = create_upstream(window=max(j.window for j in jobs))
    upstream.state.fail_summaries = fail
    with ExitStack() as stack:
        up = stack.enter_context(BackgroundServer(upstream))
        data = stack.enter_context(tempfile.TemporaryDirectory())
        config: dict[str, Any] = {
            "upstreams": {"demo": {"base_url": f"{up.url}/v1"}},
            "models": {
                j.model: {"context_window": j.window, "tokenizer": "o200k_base"} for j in jobs
            },
            "data_dir": data,
        }
        if summarizer is not None:
            config["upstreams"]["summarizer"] = {
                "base_url": summarizer.url,
                "api_key_env": summarizer.key_env,
            }
            chosen = {"model": f"openai/{summarizer.model}", "upstream": "summarizer"}
            config["policies"] = {"default": {"summarizer": chosen}}
            config["default_upstream"] = "demo"
        proxy = stack.enter_context(BackgroundServer(create_app(load_settings(None, **config))))
        received = upstream.state.received
        # litellm prints a banner to stdout on every failed call: not into the bench's table.
        with ThreadPoolExecutor(WORKERS) as pool, redirect_stdout(io.StringIO()):
            return list(pool.map(lambda j: drive(j, proxy.url, received, first_sight), jobs))


def make_jobs(all_cases: list[Case]) -> list[Job]:
    jobs: list[Job] = []
    for case in all_cases:
        base = count(case.messages)
        for share, label in SHARES:
            window = round(share * base) + MAX_TOKENS + MARGIN
            jobs.append(Job(case=case, share=label, model=f"fid-{len(jobs)}", window=window))
    return jobs


def tally(jobs: list[Job], arms: dict[str, list[dict[int, Point]]]) -> dict[tuple[str, str], Tally]:
    """Scores by (family, arm); the controls at the first arm's points."""
    controls: dict[str, Callable[[Point], list[Message]]] = {
        TRUNCATE: lambda p: truncate_last_n(p.sent, p.budget),
        EMPTY: lambda p: empty_artifact(p.sent),
        EVERYTHING: lambda p: p.sent,
    }
    out: dict[tuple[str, str], Tally] = {}
    for k, job in enumerate(jobs):
        for cycle in CYCLES:
            for arm, runs in arms.items():
                point = runs[k].get(cycle)
                got = score(job.case, point, point.forwarded) if point else None
                out.setdefault((job.case.family, arm), Tally()).add(cycle, job.share, got)
            point = arms[NOTHING][k].get(cycle)
            for name, control in controls.items():
                got = score(job.case, point, control(point)) if point else None
                out.setdefault((job.case.family, name), Tally()).add(cycle, job.share, got)
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _cells(t: Tally, cycle: int) -> tuple[float, str]:
    by_share = [[s.kept for s in t.scores.get((cycle, label), [])] for _, label in SHARES]
    every = [x for xs in by_share for x in xs]
    return _mean(every), " / ".join(f"{_mean(xs):.2f}" for xs in by_share)


def _merged(results: dict[tuple[str, str], Tally], family: str, arm: str) -> Tally:
    """``arm``'s tally over ``family``, or over every family."""
    t = Tally()
    for (f, a), x in results.items():
        if a == arm and family in (f, ALL):
            t.missing += x.missing
            for key, scores in x.scores.items():
                t.scores.setdefault(key, []).extend(scores)
    return t


def _row(family: str, arm: str, t: Tally, truncation: Tally) -> list[str]:
    row = [family, arm]
    for cycle in CYCLES:
        mean, split = _cells(t, cycle)
        versus = ""
        if arm.startswith("proxy"):
            versus = f", {mean - _cells(truncation, cycle)[0]:+.2f} vs truncation"
        row.append(f"{mean:.2f} ({split}){versus}")
    squeeze = [
        _mean([s.compression for s in t.scores.get((cycle, label), [])])
        for cycle in CYCLES
        for _, label in SHARES
    ]
    row.append(" / ".join(f"{x:.2f}" for x in squeeze))
    every = [s for scores in t.scores.values() for s in scores]
    alone, replaced = sum(s.replaced_alone for s in every), sum(s.replaced for s in every)
    row.append(f"{alone} of {replaced}")
    row.append(f"{len(every)}" + (f" ({t.missing} never cut)" if t.missing else ""))
    return row


def rows_of(results: dict[tuple[str, str], Tally], arms: list[str]) -> list[list[str]]:
    families = sorted({family for family, _ in results})
    return [
        _row(family, arm, _merged(results, family, arm), _merged(results, family, TRUNCATE))
        for family in [*families, ALL]
        for arm in arms
    ]


def fidelity_rows(
    quick: bool, summarizer: Summarizer | None = None
) -> tuple[list[str], list[list[str]]]:
    if quick:
        chosen = cases(seeds=1, levels=(DifficultyLevel.HARD,), per_family=1)
    else:
        chosen = cases(
            seeds=3, levels=(DifficultyLevel.HARD, DifficultyLevel.ELITE), per_family=None
        )
    jobs = make_jobs(chosen)
    arms = {NOTHING: run_arm(jobs)}
    if not quick:  # the smoke test's run: the floor's one arm, in half the time
        arms[FAILING] = run_arm(jobs, fail=True)
        arms[FIRST_SIGHT] = run_arm(jobs, first_sight=True)
    if summarizer is not None:
        arms[CONFIGURED] = run_arm(jobs, summarizer=summarizer)
    names = [*arms, TRUNCATE, EMPTY, EVERYTHING]
    header = [
        "family",
        "arm",
        "kept after 2 cycles (budget 1/3 / 1/2)",
        "kept after 3 cycles (1/3 / 1/2)",
        "compression: 2 cycles 1/3, 1/2; 3 cycles 1/3, 1/2",
        "replaced decision shown alone",
        "points",
    ]
    return header, rows_of(tally(jobs, arms), names)
