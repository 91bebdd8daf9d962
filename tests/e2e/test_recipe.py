"""The recipe of docs/operations.md, run: three ``contextwarden serve`` replicas on one real
Redis behind a real HAProxy (round robin, health checks on ``/ready``), growing conversations
in chat, Responses and Anthropic Messages, one replica killed mid-run; against the same
workload on one process with its SQLite file, run beside it."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.topology import REPLICAS, Balancer, Redis, Replica, replica_config, wait_for
from tests.e2e.workload import Conversation, Figures, conversations, drive, upstream_states

WINDOW = 4096
MODELS = {"chat": "demo-chat", "responses": "demo-responses", "messages": "demo-claude"}
COUNTS = {"chat": 5, "responses": 1, "messages": 1}  # the five chats, and the others
TURNS = 30
KILL_AT = 20  # the turn before which one replica is killed
THINK = 0.15  # seconds between an answer and the next turn: a user's, an agent's tool run


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
class Demo:
    url: str
    state: Any  # the demo upstream's record: received bodies, summaries


@pytest.fixture
def demos() -> Iterator[tuple[Demo, Demo]]:
    """Two demo upstreams: one for the replicas, one for the single process."""
    with ExitStack() as stack:
        apps = [create_upstream(window=WINDOW) for _ in range(2)]
        servers = [stack.enter_context(BackgroundServer(app)) for app in apps]
        yield Demo(servers[0].url, apps[0].state), Demo(servers[1].url, apps[1].state)


def wrong_prefixes(talks: list[Conversation], received: list[dict[str, Any]]) -> int:
    """How many of the proxy's prefix verdicts differ from the upstream's own log."""
    theirs = upstream_states(received)
    return sum(
        ours.prefix != state
        for talk in talks
        for ours, state in zip(talk.answers, theirs[talk.tag], strict=True)
    )


def test_three_replicas_behind_round_robin_equal_one_process(
    demos: tuple[Demo, Demo], tmp_path: Path
) -> None:
    shared, alone = demos
    with ExitStack() as stack:
        single = stack.enter_context(
            Replica({**upstream(alone.url), "data_dir": str(tmp_path / "single")}, tmp_path, "one")
        )
        redis = stack.enter_context(Redis(tmp_path))
        replicas = [
            stack.enter_context(
                Replica(replica_config(upstream(shared.url), redis.url, tmp_path / n), tmp_path, n)
            )
            for n in REPLICAS
        ]
        for process in (single, *replicas):
            wait_for(process.ready, "every replica ready", timeout=90)
        balancer = stack.enter_context(Balancer("haproxy", "haproxy.cfg", tmp_path, replicas))
        ours, theirs = (conversations(COUNTS, MODELS, seed=45) for _ in range(2))

        def kill(turn: int) -> None:
            """Between two turns: nothing in flight, the load balancer not told."""
            if turn == KILL_AT:
                replicas[1].signal(signal.SIGKILL)
                replicas[1].popen.wait(10)  # gone: its port refuses connections

        with ThreadPoolExecutor(2) as pool:
            runs = [
                pool.submit(drive, balancer.url, ours, TURNS, kill, THINK),
                pool.submit(drive, single.url, theirs, TURNS, lambda turn: None, THINK),
            ]
            for run in runs:
                run.result()
    replicated, one = Figures.of(ours), Figures.of(theirs)
    errors = [
        f"{c.tag} turn {t}: {a.error}"
        for c in ours + theirs
        for t, a in enumerate(c.answers)
        if a.error
    ]
    assert not errors, errors
    assert one.answered == one.requests == TURNS * sum(COUNTS.values())
    assert replicated.answered == replicated.requests == one.requests
    chats = Figures.of([c for c in ours if c.fmt == "chat"])
    assert (chats.answered, chats.trimmed_without_summary) == (150, 0)  # the workload
    assert replicated.trimmed_without_summary == one.trimmed_without_summary == 0
    assert replicated.trimmed == one.trimmed
    # Each prefix verdict is the upstream's own (the bodies it received, in order).
    assert wrong_prefixes(ours, shared.state.received) == 0
    assert wrong_prefixes(theirs, alone.state.received) == 0
    # Whether a request finds the summary prepared for it ready (reused) or still being made
    # (it waits: created), and so where a sticky cut is renewed, is a race with the client's
    # next request, in one process as in three: the counts may differ by that, never more.
    noise = max(2, one.trimmed // 40)
    print(f"\none process: {one}\nthree replicas: {replicated}")
    assert abs(replicated.reuses - one.reuses) <= noise, (replicated, one)
    assert abs(replicated.prefix["kept"] - one.prefix["kept"]) <= noise, (replicated, one)
    summaries = (len(shared.state.summaries), len(alone.state.summaries))
    assert abs(summaries[0] - summaries[1]) <= noise, summaries
