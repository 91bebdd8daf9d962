"""The recipe of docs/operations.md, run once (``recipe``) and checked by each test below: three
``contextwarden serve`` replicas on one real Redis behind a real HAProxy (round robin, health
checks on ``/ready``), growing conversations in chat, Responses and Anthropic Messages.

1. Thirty turns, one replica killed before turn 20; beside it, the same workload on one process
   with its SQLite file.
2. The conversations go on while Redis is stopped (SIGSTOP: it hangs) for 10 seconds, and after
   it resumes.
3. The same while Redis is killed, and 10 seconds later started again, empty.

Everything runs at the defaults (the store's 1-second timeout, its 5-second rest after a
fault), with the policy's summaries on, as they are by default.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from proxy.config.settings import Checkpoints
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.topology import REPLICAS, Balancer, Redis, Replica, replica_config, wait_for
from tests.e2e.workload import Answer, Conversation, Figures, conversations, drive, upstream_states

WINDOW = 4096
MODELS = {"chat": "demo-chat", "responses": "demo-responses", "messages": "demo-claude"}
COUNTS = {"chat": 5, "responses": 1, "messages": 1}  # the five chats, and the others
TURNS = 30
KILL_AT = 20  # the turn before which one replica is killed
THINK = 0.15  # seconds between an answer and the next turn: a user's, an agent's tool run
OUTAGE = 10.0
RECOVERY = 8.0  # the store rests 5 seconds after its last fault, then is asked again
TIMEOUT = Checkpoints().timeout_seconds


def upstream(url: str) -> dict[str, Any]:
    """The test's upstream (the demo, all three APIs) and its models; Anthropic's tokenizer
    counts more than o200k, so the Messages model's window is the proxy's safe one."""
    apis = ["chat_completions", "responses", "messages"]
    return {
        "upstreams": {"demo": {"base_url": f"{url}/v1", "apis": apis}},
        "models": {
            MODELS["chat"]: {"context_window": WINDOW, "tokenizer": "o200k_base"},
            MODELS["responses"]: {"context_window": WINDOW, "tokenizer": "o200k_base"},
            MODELS["messages"]: {"context_window": WINDOW * 7 // 8, "tokenizer": "o200k_base"},
        },
    }


@dataclass
class Run:
    """What the recipe's run recorded: the conversations through the load balancer (``ours``)
    and on one process (``theirs``), each demo upstream's record, and where each phase of
    ``ours`` begins (an index into every conversation's answers: the turns are in step)."""

    ours: list[Conversation]
    theirs: list[Conversation]
    shared: Any
    alone: Any
    replicas: list[Replica] = field(default_factory=list)
    workdir: Path = Path()
    phases: dict[str, int] = field(default_factory=dict)

    def answers(self, start: str, end: str | None = None) -> list[Answer]:
        lo, hi = self.phases[start], self.phases[end] if end else None
        return [a for c in self.ours for a in c.answers[lo:hi]]


def for_seconds(url: str, talks: list[Conversation], seconds: float) -> None:
    """Turns of every conversation until ``seconds`` have passed."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        drive(url, talks, 1, pause=THINK)


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("recipe")
    with ExitStack() as stack:
        apps = [create_upstream(window=WINDOW) for _ in range(2)]
        shared, alone = (stack.enter_context(BackgroundServer(app)) for app in apps)
        config = {**upstream(alone.url), "data_dir": str(tmp / "single")}
        single = stack.enter_context(Replica(config, tmp, "one"))
        redis = stack.enter_context(Redis(tmp))
        replicas = [
            stack.enter_context(
                Replica(replica_config(upstream(shared.url), redis.url, tmp / n), tmp, n)
            )
            for n in REPLICAS
        ]
        for process in (single, *replicas):
            wait_for(process.ready, "every replica ready", timeout=90)
        balancer = stack.enter_context(Balancer("haproxy", "haproxy.cfg", tmp, replicas))
        talks = (conversations(COUNTS, MODELS, seed=45) for _ in range(2))
        run = Run(*talks, *(app.state for app in apps), replicas, tmp)
        run.phases["start"] = 0

        def kill(turn: int) -> None:
            """Between two turns: nothing in flight, the load balancer not told."""
            if turn == KILL_AT:
                replicas[1].signal(signal.SIGKILL)
                replicas[1].popen.wait(10)  # gone: its port refuses connections

        with ThreadPoolExecutor(2) as pool:
            runs = [
                pool.submit(drive, balancer.url, run.ours, TURNS, kill, THINK),
                pool.submit(drive, single.url, run.theirs, TURNS, lambda turn: None, THINK),
            ]
            for done in runs:
                done.result()

        def phase(name: str, seconds: float) -> None:
            run.phases[name] = len(run.ours[0].answers)
            for_seconds(balancer.url, run.ours, seconds)

        redis.signal(signal.SIGSTOP)
        phase("hung", OUTAGE)
        redis.signal(signal.SIGCONT)
        phase("resumed", RECOVERY)
        redis.signal(signal.SIGKILL)
        redis.popen.wait(10)
        phase("killed", OUTAGE)
        stack.enter_context(Redis(tmp, redis.port))  # started again, empty
        phase("empty", RECOVERY)
        run.phases["end"] = len(run.ours[0].answers)
        yield run


def wrong_prefixes(talks: list[Conversation], received: list[dict[str, Any]]) -> int:
    """How many of the proxy's prefix verdicts differ from the upstream's own log."""
    theirs = upstream_states(received)
    return sum(
        ours.prefix != state
        for talk in talks
        for ours, state in zip(talk.answers, theirs[talk.tag], strict=True)
    )


@pytest.mark.slow
def test_three_replicas_behind_round_robin_equal_one_process(recipe: Run) -> None:
    ours = [
        Conversation(c.fmt, c.model, c.tag, c.rng, answers=c.answers[:TURNS]) for c in recipe.ours
    ]
    replicated, one = Figures.of(ours), Figures.of(recipe.theirs)
    errors = [a.error for c in ours + recipe.theirs for a in c.answers if a.error]
    assert not errors, errors
    assert one.answered == one.requests == TURNS * sum(COUNTS.values())
    assert replicated.answered == replicated.requests == one.requests
    chats = Figures.of([c for c in ours if c.fmt == "chat"])
    assert (chats.answered, chats.trimmed_without_summary) == (150, 0)  # the workload
    assert replicated.trimmed_without_summary == one.trimmed_without_summary == 0
    assert replicated.trimmed == one.trimmed
    # Each prefix verdict is the upstream's own (the bodies it received, in order).
    received = recipe.shared.received[: len(recipe.alone.received)]
    assert wrong_prefixes(ours, received) == 0
    assert wrong_prefixes(recipe.theirs, recipe.alone.received) == 0
    # Whether a request finds the summary prepared for it ready (reused) or still being made
    # (it waits: created), and so where a sticky cut is renewed, is a race with the client's
    # next request, in one process as in three: the counts may differ by that, never more.
    noise = max(2, one.trimmed // 40)
    assert abs(replicated.reuses - one.reuses) <= noise, (replicated, one)
    assert abs(replicated.prefix["kept"] - one.prefix["kept"]) <= noise, (replicated, one)


def outage(recipe: Run, start: str, back: str, end: str) -> None:
    """Every request answered while the store was out, within the window, fresh cuts without
    summaries, none waiting past the store's timeout; summaries and sticky cuts once it is
    back."""
    out, after = recipe.answers(start, back), recipe.answers(back, end)
    assert all(a.status == 200 for a in out + after), [a.error for a in out + after if a.error]
    assert all(a.retries == "0" for a in out + after)  # no prompt over the window
    trimmed = [a.actions.split(",") for a in out if a.actions != "none"]
    assert trimmed and not any("summarize" in a or "sticky" in a for a in trimmed), trimmed
    slowest = max(a.seconds for a in out)
    assert slowest < TIMEOUT + 0.75, slowest
    # Back: the last turns summarize again, and replay their cuts.
    hi = recipe.phases[end]
    last = [(c.tag, a.actions, a.checkpoint) for c in recipe.ours for a in c.answers[hi - 2 : hi]]
    unsummarized = [x for x in last if x[1] != "none" and "summarize" not in x[1].split(",")]
    assert not unsummarized, unsummarized
    assert any("sticky" in a.actions for a in after)


@pytest.mark.slow  # the recipe's run (its fixture) takes about a minute
def test_a_redis_that_hangs_for_ten_seconds_costs_no_answer(recipe: Run) -> None:
    outage(recipe, "hung", "resumed", "killed")


@pytest.mark.slow  # the recipe's run (its fixture) takes about a minute
def test_a_redis_started_again_empty_costs_no_answer(recipe: Run) -> None:
    outage(recipe, "killed", "empty", "end")


def served(replica: Replica) -> float:
    """The requests a replica has served (its /metrics)."""
    text = httpx.get(f"{replica.url}/metrics", timeout=5).text
    lines = [line for line in text.splitlines() if line.startswith("contextwarden_requests_total")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


def where(recipe: Run, balancer: Balancer, headers: dict[str, str], n: int = 6) -> list[float]:
    """How many of ``n`` small requests with ``headers`` each live replica served."""
    live = [r for r in recipe.replicas if r.popen.poll() is None]
    before = [served(r) for r in live]
    with openai.OpenAI(base_url=f"{balancer.url}/v1", api_key="sk-recipe", max_retries=0) as client:
        for k in range(n):
            client.chat.completions.create(
                model=MODELS["chat"],
                messages=[{"role": "user", "content": f"hello {k}"}],
                max_tokens=16,
                extra_headers=headers,
            )
        return [served(r) - b for r, b in zip(live, before, strict=True)]


SESSIONS = [
    {"session-id": "codex-0.169"},  # what the pinned Codex sends (tests/clients)
    {"session_id": "codex-older"},
    {"x-claude-code-session-id": "claude-code"},
]


@pytest.mark.slow  # the recipe's run (its fixture) takes about a minute
@pytest.mark.parametrize("kind", ["haproxy", "nginx"])
def test_the_load_balancers_configs_spread_requests_or_keep_sessions(
    recipe: Run, kind: str
) -> None:
    """deploy/'s other configs, in front of the same replicas (one of them killed): round
    robin spreads requests over the live ones; affinity keeps each session's on one, and
    spreads those without a session header."""
    names = {"haproxy": ("haproxy.cfg", "haproxy-affinity.cfg"), "nginx": ("nginx.conf",)}
    names["nginx"] += ("nginx-affinity.conf",)
    plain, affinity = names[kind]
    with Balancer(kind, plain, recipe.workdir, recipe.replicas) as balancer:
        assert all(n > 0 for n in where(recipe, balancer, {})), kind
    with Balancer(kind, affinity, recipe.workdir, recipe.replicas) as balancer:
        if kind == "haproxy":
            time.sleep(2.5)  # its health checks have found the killed replica down
        for headers in SESSIONS:
            assert sorted(where(recipe, balancer, headers)) == [0, 6], headers
        assert all(n > 0 for n in where(recipe, balancer, {}, 12)), kind


def test_the_recipe_in_the_docs_is_the_files_this_test_runs() -> None:
    """docs/operations.md shows each file of deploy/ whole, as this test runs it."""
    from tests.e2e.topology import DEPLOY, ROOT

    docs = (ROOT / "docs" / "operations.md").read_text()
    blocks = {body for _, body in re.findall(r"^```(\w+)\n(.*?)^```", docs, re.M | re.S)}
    files = sorted(p for p in DEPLOY.iterdir() if p.is_file())  # kubernetes/: test_kubernetes.py
    assert {p.name for p in files} >= {"haproxy.cfg", "nginx.conf", "docker-compose.yaml"}
    for path in files:
        assert path.read_text() in blocks, f"{path.name} is not shown whole in the docs"
