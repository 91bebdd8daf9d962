"""One step larger than the window, with the real CLIs at 16k: a file read twice the window and
a test run that prints 5,000 lines. The proxy refused both before (the task and the newest step
had to fit whole); now it cuts the step's output to a head, a tail and its error lines, says so
in the output the model reads, and the run goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import AgentFactory
from tests.clients.test_codex import DEFAULT_MODEL, codex
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
