"""One step larger than the window, with the real CLIs at 16k: a file read twice the window and
a test run that prints 5,000 lines. The proxy refused both before (the task and the newest step
had to fit whole); now it cuts the step's output to a head, a tail and its error lines, says so
in the output the model reads, and the run goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import RELEASES, TASK, AgentFactory, never_shown
from tests.clients.scripted import RECALL
from tests.clients.test_claude_code import MODELS as CLAUDE_MODELS
from tests.clients.test_claude_code import check_forwarded, claude
from tests.clients.test_claude_code import env as claude_env
from tests.clients.test_codex import DEFAULT_MODEL, codex
from tests.clients.test_openai_agents import MODEL as AGENTS_MODEL
from tests.clients.test_openai_agents import run_task
from tests.strategies.invariants import CUT_MARK

pytestmark = pytest.mark.slow  # each test runs the real CLI for several seconds

FAILED = "FAILED tests/test_auth.py::test_login - AssertionError: expected 200, got 500"


def large_steps(work: Path) -> None:
    """step-02.txt: a file of about twice the 16k window; step-03.txt: a test run of 5,000
    lines with one failure near its end."""
    lines = [
        f"{i:5d}  def handler_{i}(request): return render(request, 'page_{i}.html', ctx={i})\n"
        for i in range(1_600)
    ]
    (work / "step-02.txt").write_text("key of step 02: 00002\n" + "".join(lines))
    run = [
        f"tests/test_mod{i}.py::test_case_{i} PASSED [{i * 100 // 5000:3d}%]\n" for i in range(5000)
    ]
    run[4990] = FAILED + "\n"  # in the tail Codex keeps of an output it truncates itself
    (work / "step-03.txt").write_text("key of step 03: 00003\n" + "".join(run))


def outputs(body: dict[str, Any]) -> list[str]:
    return [
        str(item.get("output"))
        for item in body["input"]
        if str(item.get("type", "")).endswith("call_output")
    ]


def test_codex_reads_a_file_twice_the_window_and_a_5000_line_test_run(
    make_agent: AgentFactory,
) -> None:
    """Its default model at 16k: the instructions take 13,800 tokens, and Codex's own cap on a
    command's output (about 10k tokens) leaves a step larger than the window. Every request
    is answered, within the upstream's window by its own count, the outputs that did not fit
    cut with the marker, and the failure line kept."""
    agent = make_agent(16_000, steps=4, models=[DEFAULT_MODEL])
    large_steps(agent.work)
    argv, env = codex(agent, DEFAULT_MODEL)
    run = agent.run(argv, env)
    assert run.returncode == 0, run
    assert "Done after 4 steps" in run.stdout, run
    assert not agent.script.refused
    forwarded = agent.forwarded("responses")
    newest = [outputs(body)[-1] for body in forwarded if outputs(body)]
    cut = [text for text in newest if text.startswith(CUT_MARK) or CUT_MARK in text[:200]]
    assert len(cut) == 2, [(len(text), text[:300]) for text in newest]  # steps 2 and 3
    assert any(FAILED in text for text in cut)  # the failure Codex kept, kept by the cut


def results(body: dict[str, Any]) -> list[str]:
    """The texts of a Messages body's tool results, in order."""
    out = []
    for message in body["messages"]:
        content = message["content"]
        if message["role"] != "user" or isinstance(content, str):
            continue
        for block in content:
            if block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if isinstance(inner, list):
                inner = "\n".join(b.get("text", "") for b in inner if b.get("type") == "text")
            out.append(str(inner or ""))
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_claude_code_reads_a_file_twice_the_window_and_a_5000_line_test_run(
    make_agent: AgentFactory, release: str
) -> None:
    """Claude Code at 16k beyond its frame (18,600 tokens by the upstream's count): the same
    two steps. Its Bash tool keeps an output over 30,000 characters to itself (saved to a file,
    a 2 KB preview shown), so neither step reaches the proxy larger than the window: the run
    finishes with no refusal and the previews forwarded as the client sent them."""
    agent = make_agent(18_600 + 16_000, steps=4, models=CLAUDE_MODELS)
    large_steps(agent.work)
    run = agent.run(claude(agent, TASK, release=release), claude_env(agent))
    assert run.returncode == 0, run
    assert "Done after 4 steps" in run.stdout, run
    assert not agent.script.refused
    newest = [results(body)[-1] for body in agent.forwarded("messages") if results(body)]
    assert sum("Output too large" in text for text in newest) == 2, [t[:200] for t in newest]
    check_forwarded(agent)


async def test_openai_agents_reads_a_file_twice_the_window_and_a_5000_line_test_run(
    make_agent: AgentFactory,
) -> None:
    """openai-agents at 16k with its default model settings: the same two steps, each larger
    than the window, through the Responses API."""
    agent = make_agent(16_000, steps=4, models=[AGENTS_MODEL])
    large_steps(agent.work)
    await run_task(agent, steps=4)
    newest = [outputs(body)[-1] for body in agent.forwarded("responses") if outputs(body)]
    cut = [text for text in newest if CUT_MARK in text[:300]]
    assert len(cut) == 2, [(len(text), text[:300]) for text in newest]
    assert any(FAILED in text for text in cut)
    assert any("key of step 02" in text for text in cut)  # the head kept beside the marker


async def test_with_recall_openai_agents_gets_what_a_cut_left_out(
    make_agent: AgentFactory,
) -> None:
    """``recall: true``: each cut's marker names a handle, and a model that recalls it is
    given what the cut left out (the middle of the file, the test run's middle), not the
    head and tail it was shown again; the client never sees the tool."""
    agent = make_agent(16_000, steps=4, models=[AGENTS_MODEL], policy={"recall": True})
    agent.script.recall_cuts = True
    large_steps(agent.work)
    await run_task(agent, steps=4)
    assert len(agent.script.cut_recalls) == 2, agent.script.cut_recalls
    forwarded = agent.forwarded("responses")
    shown = "\n".join(text for body in forwarded for text in outputs(body) if CUT_MARK in text)
    # The recalls' answers: outputs that are no cut, holding the large steps' lines.
    recalled = "\n".join(
        text for body in forwarded for text in outputs(body) if CUT_MARK not in text[:300]
    )
    for name in ("step-02.txt", "step-03.txt"):
        lines = (agent.work / name).read_text().splitlines()[1:]
        unseen = [line for line in lines if line in recalled and line not in shown]
        assert len(unseen) >= 20, name  # what the cut left out, given back
    never_shown(agent, RECALL)
