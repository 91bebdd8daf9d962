"""Codex CLI (``codex exec``, pinned in package.json) through the proxy, at windows that force
trimming inside its tool loop.

Its default model sends no ``instructions`` and no top-level ``tools``: the tools come first, as
an ``additional_tools`` input item, then the ``developer`` messages that hold its system prompt,
and it runs shell commands through a JavaScript ``exec`` custom tool. ``-m gpt-5.1-codex``
sends top-level function tools instead. The scripted upstream rejects what the API rejects
(a call without its output, a reasoning item without its following item, an over-window
prompt), so an answered run is a run whose every forwarded request was valid.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from proxy.config.settings import load_settings
from proxy.windows.bounds import MAX_REFUSALS
from proxy.windows.client_setup import lines, setup_for
from tests.clients.conftest import (
    LONG_RUNS,
    RELEASES,
    TASK,
    Agent,
    AgentFactory,
    client,
    never_shown,
    same,
)
from tests.clients.scripted import RECALL

pytestmark = pytest.mark.slow  # each test runs the real CLI for several seconds

DEFAULT_MODEL = "gpt-6.1-sol"  # what this version asks for with no -m
# The prefix (tools item and developer messages) is about 11,700 tokens for the default
# model and 3,000 with -m gpt-5.1-codex, by the upstream's count: each window leaves 16k for
# the task, and a step reads about 3,000.
CURRENT_DEFAULT = "gpt-6.2-sol"  # the current release's default model
WINDOWS = {DEFAULT_MODEL: 11_700 + 16_000, "gpt-5.1-codex": 3_000 + 16_000}
STEPS = 30


def codex(agent: Agent, model: str, release: str = "pinned") -> tuple[list[str], dict[str, str]]:
    home = agent.home / ".codex"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'model_provider = "contextwarden"\n'
        "[model_providers.contextwarden]\n"
        'name = "contextwarden"\n'
        f'base_url = "{agent.proxy_url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
    )
    argv = [
        str(client("codex", release)),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",  # the task directory is the test's own
    ]
    if model != DEFAULT_MODEL:
        argv += ["-m", model]
    return [*argv, TASK], {"OPENAI_API_KEY": "sk-test", "CODEX_HOME": str(home)}


def prefix(body: dict[str, Any]) -> list[Any]:
    """Everything before the first user message, with ``instructions`` and ``tools``."""
    items = body["input"]
    first = next(i for i, item in enumerate(items) if item.get("role") == "user")
    return [body.get("instructions"), body.get("tools"), items[:first]]


def task_and_newest(body: dict[str, Any]) -> list[Any]:
    """The task (the last user message) and the newest step (the last reasoning item and
    what follows it)."""
    items = body["input"]
    task = max(i for i, item in enumerate(items) if item.get("role") == "user")
    last = max(
        (i for i in range(task, len(items)) if items[i].get("type") == "reasoning"),
        default=len(items),
    )
    return [items[task], items[last:]]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("model", list(WINDOWS))
def test_a_long_task_keeps_its_tools_and_prefix(
    make_agent: AgentFactory, model: str, release: str
) -> None:
    agent = make_agent(WINDOWS[model], steps=STEPS, models=[model, CURRENT_DEFAULT])
    argv, env = codex(agent, model, release)
    run = agent.run(argv, env)
    assert run.returncode == 0, run
    assert f"Done after {STEPS} steps" in run.stdout, run
    assert not agent.script.refused
    # One session id on every request of the run: what docs/operations.md's load balancers
    # keep a session on one replica by (Codex sends it as `session-id`).
    sessions = {r.headers.get("session-id") for r in agent.script.received}
    assert len(sessions) == 1 and None not in sessions, sessions
    sent, forwarded = agent.sent("/v1/responses"), agent.forwarded("responses")
    assert len(sent) == len(forwarded) == STEPS + 1
    for theirs, ours in zip(sent, forwarded, strict=True):
        assert same(prefix(ours)) == same(prefix(theirs))
        assert same(task_and_newest(ours)) == same(task_and_newest(theirs))
    # The window forced trimming: later requests went with fewer steps than were taken.
    calls = [[i for i in b["input"] if "call" in str(i.get("type"))] for b in forwarded]
    kept = [len([c for c in cs if not c["type"].endswith("output")]) for cs in calls]
    assert kept[-1] < STEPS


def test_its_default_model_runs_100_steps_at_16k(make_agent: AgentFactory) -> None:
    """Its prefix (the tools item and the developer messages) takes about 11,700 of the 16,000
    tokens, and it asks for no output limit: the reply reserve the proxy would keep shrinks
    to what the window leaves beside the task and the newest step, as the upstream accepts
    (it was refused at step 2)."""
    agent = make_agent(16_000, steps=100, models=[DEFAULT_MODEL])
    argv, env = codex(agent, DEFAULT_MODEL)
    run = agent.run(argv, env, timeout=600)
    assert run.returncode == 0, run
    assert "Done after 100 steps" in run.stdout, run
    assert not agent.script.refused
    sent, forwarded = agent.sent("/v1/responses"), agent.forwarded("responses")
    assert len(sent) == len(forwarded) == 101
    for theirs, ours in zip(sent, forwarded, strict=True):
        assert same(prefix(ours)) == same(prefix(theirs))
        assert same(task_and_newest(ours)) == same(task_and_newest(theirs))


def test_its_default_model_runs_100_steps_at_16k_unlisted(make_agent: AgentFactory) -> None:
    """The README's way: the model listed nowhere, its 16k window unknown to the proxy until
    the upstream refuses (OpenAI's wording, no figures). The refusal teaches the window once;
    the retry fits the task (its instructions take 13,800 of the 16,000 tokens, so the reply
    reserve is shared with the newest step), and every later request fits from the start.
    The proxy let the refusal stand before: 0 steps, where the upstream alone gives 1. A
    window learned without figures is narrowed by probes (proxy/windows/bounds.py), each a
    refusal the retry absorbs: at most ``MAX_REFUSALS`` in all (2 in this run when measured)."""
    agent = make_agent(16_000, steps=100, models={})
    argv, env = codex(agent, DEFAULT_MODEL)
    run = agent.run(argv, env, timeout=600)
    assert run.returncode == 0, run
    assert "Done after 100 steps" in run.stdout, run
    assert len(agent.sent("/v1/responses")) == 101
    assert 1 <= len(agent.script.refused) <= MAX_REFUSALS
    answered = [r.body for r in agent.script.received if r.status == 200]
    assert len(answered) == 101
    for theirs, ours in zip(agent.sent("/v1/responses"), answered, strict=True):
        assert same(prefix(ours)) == same(prefix(theirs))


def test_a_task_with_room_for_a_few_steps_keeps_its_prefix(make_agent: AgentFactory) -> None:
    """``-m gpt-5.1-codex`` at 16k with steps of about 1,300 tokens: each fresh cut goes down to
    the task and its newest step, so the next requests only append while they fit. Two in
    three consecutive requests keep the previous prompt as their prefix (the most this window
    holds: a cut leaves room for two more steps beside the 4,000-token reply reserve)."""
    agent = make_agent(16_000, steps=60, models=["gpt-5.1-codex"], lines=40)
    argv, env = codex(agent, "gpt-5.1-codex")
    run = agent.run(argv, env, timeout=600)
    assert run.returncode == 0, run
    assert not agent.script.refused
    inputs = [body["input"] for body in agent.forwarded("responses")]
    kept = sum(b[: len(a)] == a for a, b in itertools.pairwise(inputs))
    assert kept >= 0.6 * (len(inputs) - 1), kept


def test_a_long_task_with_recall_never_shows_it_the_tool(make_agent: AgentFactory) -> None:
    """Steps 9, 12, ... need the output of the step six before: with ``recall: true`` the
    model recalls it through the proxy instead of running the command again, and Codex never
    sees the recall tool in any answer or stream."""
    model = DEFAULT_MODEL
    policy = {"recall": True}
    agent = make_agent(WINDOWS[model], steps=STEPS, models=[model], policy=policy, lag=6, every=3)
    argv, env = codex(agent, model)
    run = agent.run(argv, env)
    assert run.returncode == 0, run
    assert f"Done after {STEPS} steps" in run.stdout, run
    assert not agent.script.refused
    assert agent.script.recalls >= 3
    assert agent.script.reruns == 0
    never_shown(agent, RECALL)
    assert RECALL not in run.stdout + run.stderr


def compacting(agent: Agent, context_window: int) -> tuple[list[str], dict[str, str]]:
    """Codex told its model's window is ``context_window``, so that it compacts its own history
    past about nine tenths of it. A provider named ``OpenAI`` (or the built-in one pointed at
    the proxy with ``openai_base_url``, which also tries WebSockets first) makes it compact
    through the API: an ordinary ``POST /responses`` whose input ends with a
    ``compaction_trigger`` item, answered with exactly one ``compaction`` item."""
    home = agent.home / ".codex"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'model_provider = "proxied"\n'
        f"model_context_window = {context_window}\n"
        "[model_providers.proxied]\n"
        'name = "OpenAI"\n'
        f'base_url = "{agent.proxy_url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
    )
    argv = [
        str(client("codex")),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        TASK,
    ]
    return argv, {"OPENAI_API_KEY": "sk-test", "CODEX_HOME": str(home)}


def kinds(body: dict[str, Any]) -> list[Any]:
    return [item.get("type") for item in body["input"]]


def test_its_own_compactions_are_answered_by_the_proxy(make_agent: AgentFactory) -> None:
    """An upstream that does not implement Responses compaction (the scripted one answers the
    trigger as an ordinary turn): the proxy forwards each compaction, sees no compaction item in
    the answer, and answers it itself with its own summary checkpoint (an ordinary turn is no
    explicit "not supported": nothing is learned); Codex sends the item back in every later
    request, and the upstream receives the summary it holds as a user message. The task
    finishes across the compactions."""
    steps = 15  # about 3,000 tokens a step: Codex compacts every few steps at a 30k window
    agent = make_agent(400_000, steps=steps, models={})
    argv, env = compacting(agent, 30_000)
    run = agent.run(argv, env)
    assert run.returncode == 0, run
    assert f"Done after {steps} steps" in run.stdout, run
    sent, forwarded = agent.sent("/v1/responses"), agent.forwarded("responses")
    asked = [k for k, body in enumerate(sent) if "compaction_trigger" in kinds(body)]
    print(f"\n{len(sent)} requests, {len(asked)} compactions, {len(forwarded)} forwarded")
    assert len(asked) >= 2, "Codex never compacted twice"
    # Each was forwarded (auto): an ordinary turn teaches nothing.
    assert sum("compaction_trigger" in kinds(body) for body in forwarded) == len(asked)
    assert len(forwarded) == len(sent)
    # The item came back in the next requests, and reached the upstream as the summary.
    after = sent[asked[0] + 1 :]
    assert all("compaction" in kinds(body) for body in after)
    assert not any("compaction" in kinds(body) for body in forwarded)
    summary = "[Conversation summary: earlier messages were compacted]"
    assert summary in same(forwarded[-1]["input"]).decode()
    assert len(agent.script.summaries) >= len(asked)  # each made by the summarizer
    # The summary read back is history: the task Codex keeps stays the task, in every request.
    steps = [b for b in sent if "compaction_trigger" not in kinds(b)]
    with_task = sum(TASK in str(b["input"]) for b in steps)
    shown = sum(TASK in str(b["input"]) for b in forwarded if "compaction_trigger" not in kinds(b))
    print(f"the task in {with_task} of Codex's {len(steps)} steps, {shown} forwarded")
    assert shown == with_task


def test_after_its_own_compaction_the_task_stays_the_task(make_agent: AgentFactory) -> None:
    """Codex compacting its own history (locally: a provider not named OpenAI) puts its summary
    back as a user message after the user's task, which it keeps. The proxy took that summary
    (and the compaction prompt) for the task and dropped the real one as history (49 of 101
    requests at 16k), and summarized the compaction requests themselves: the summary of a
    summary lost how far the task went, and Codex restarted it over and over (1,094 requests,
    273 compactions, never done, before this). Now: the task verbatim in every forwarded
    request, no compaction request summarized by the proxy, and the task finishes."""
    steps = 16
    window = 12_000  # its frame (3,000) and about three steps: the proxy trims every few steps
    agent = make_agent(window, steps=steps, models={"gpt-5.1-codex": {"context_window": window}})
    argv, env = codex(agent, "gpt-5.1-codex")
    config = agent.home / ".codex" / "config.toml"
    limits = f"model_context_window = {window}\n"
    config.write_text(limits + config.read_text())
    run = agent.run(argv, env)
    assert run.returncode == 0, run
    assert f"Done after {steps} steps" in run.stdout, run
    forwarded = agent.forwarded("responses")
    compactions = [k for k, body in enumerate(forwarded) if "CONTEXT CHECKPOINT" in str(body)]
    print(f"\n{len(forwarded)} forwarded, {agent.script.compactions} compactions at {compactions}")
    assert agent.script.compactions >= 2, "Codex never compacted twice"
    # Every request: the steps, the compaction requests and those after each compaction.
    assert all(TASK in str(body["input"]) for body in forwarded)
    assert not agent.script.summaries  # no compaction request was summarized by the proxy


def signed_in(agent: Agent, home: Path, release: str = "pinned") -> list[str]:
    """``codex exec``'s argv, the key saved first as Codex's own sign-in (the README's way)."""
    codex_bin = str(client("codex", release))
    subprocess.run(
        [codex_bin, "login", "--with-api-key"],
        input="sk-test\n",
        env={"PATH": os.environ["PATH"], "HOME": str(agent.home), "CODEX_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [
        codex_bin,
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
    ]


def test_set_up_with_client_setup_it_runs_at_32k(make_agent: AgentFactory) -> None:
    """Codex told the window by ``contextwarden client-setup codex`` (its lines written to
    config.toml as printed, the key saved as its sign-in) against a 32k upstream: the task
    finishes with no refusal. The test says how often Codex compacted and how often the proxy
    trimmed: Codex measures its context by the usage the upstream reports, which the proxy's
    trims keep under the window, so it compacts seldom (0 in 40 steps by HTTPS when measured;
    2 over its WebSocket, whose whole input the proxy rebuilds without Codex's own item
    metadata, a few hundred tokens less, so that a request fell just under the proxy's cut and
    the next just over Codex's limit) and the proxy fits the requests. A compaction it makes is
    served by the proxy's summarizer, whose summary the scripted model reads on from."""
    model, window, steps = "gpt-5.1-codex", 32_000, 300 if LONG_RUNS else 40
    agent = make_agent(window, steps=steps, models=[model])
    settings = load_settings(None, models={model: {"context_window": window}})
    printed = lines("codex", setup_for(settings, agent.proxy_url, model, None))
    assert f"model_context_window = {window}" in printed
    home = agent.home / ".codex"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("\n".join(printed) + "\n")
    argv = signed_in(agent, home)
    run = agent.run([*argv, TASK], {"CODEX_HOME": str(home)}, timeout=1800)
    assert run.returncode == 0, run
    assert f"Done after {steps} steps" in run.stdout, run
    assert "Reconnecting" not in run.stdout + run.stderr
    assert not agent.script.refused
    sent, forwarded = agent.sent("/v1/responses"), agent.forwarded("responses")
    compactions = sum("compaction_trigger" in kinds(body) for body in sent)
    trimmed = sum(
        len(ours["input"]) < len(theirs["input"])
        for theirs, ours in zip(sent, forwarded, strict=True)
    )
    print(
        f"\n{len(sent)} requests: Codex compacted {compactions} times, the proxy trimmed {trimmed}"
    )
    assert compactions + trimmed > 0  # the window was reached, by one or the other


@pytest.mark.parametrize("release", RELEASES)
def test_the_readme_line_runs_over_its_websocket_at_16k(
    make_agent: AgentFactory, release: str
) -> None:
    """The README's one line (``openai_base_url``, the key saved as Codex's sign-in): Codex
    opens its Responses WebSocket, the proxy serves it, and the run reaches its answer with no
    reconnect and no ERROR line. Every request went over the WebSocket (a frame each, the
    warm-up first, later ones naming the previous response with only their new items) and was
    fitted: the upstream, which refuses a prompt over its window by its own count, refused
    none; it got every item, the task in each, and the window forced cuts."""
    # About 2,400 tokens a step beside a frame of about 11,700: past the window within a few.
    steps = 6 if release == "pinned" else 9
    # The current release's frame with the built-in provider does not fit 16k by either
    # transport (its second request keeps 16,000 tokens of leading items whole: the proxy's
    # own refusal, over HTTPS too): it gets 16k beside its frame, as in the tests above.
    window = 16_000 if release == "pinned" else WINDOWS[DEFAULT_MODEL]
    agent = make_agent(window, steps=steps, models=[DEFAULT_MODEL, CURRENT_DEFAULT])
    home = agent.home / ".codex"
    home.mkdir()
    (home / "config.toml").write_text(f'openai_base_url = "{agent.proxy_url}/v1"\n')
    argv = signed_in(agent, home, release)
    run = agent.run([*argv, TASK], {"CODEX_HOME": str(home)})
    assert run.returncode == 0, run
    assert f"Done after {steps} steps" in run.stdout, run
    said = run.stdout + run.stderr
    assert "Reconnecting" not in said, run
    assert not [line for line in said.splitlines() if " ERROR " in line], run
    frames = agent.recorder.frames.get("/v1/responses", [])
    asked = [f for f in frames if f["type"] == "response.create"]
    assert asked and asked[0].get("generate") is False  # the warm-up, answered by the proxy
    generating = [f for f in asked if f.get("generate", True)]
    assert all("previous_response_id" in f for f in generating)
    sent, forwarded = agent.sent("/v1/responses"), agent.forwarded("responses")
    # Each request Codex sent came as a frame: none was posted.
    assert len(generating) == len(sent) == len(forwarded) == steps + 1
    assert not agent.script.refused
    assert all(TASK in str(body["input"]) for body in forwarded)
    assert not any("previous_response_id" in body for body in forwarded)
    for theirs, ours in zip(sent, forwarded, strict=True):
        assert same(prefix(ours)) == same(prefix(theirs))
        # The task verbatim; the newest step kept, its output cut to fit at most (the built-in
        # provider's frame leaves a step less room at 16k than a provider of one's own).
        (task, newest), (their_task, their_newest) = task_and_newest(ours), task_and_newest(theirs)
        assert same(task) == same(their_task)
        assert [i.get("call_id", i.get("id")) for i in newest] == [
            i.get("call_id", i.get("id")) for i in their_newest
        ]
    assert len(forwarded[-1]["input"]) < len(sent[-1]["input"])  # the window forced cuts
