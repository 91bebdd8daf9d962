"""openai-agents (the version pinned in pyproject.toml): one ``Runner.run`` of a 20-step task,
with default model settings, through the proxy at a 24k window. Each step reads about 2,400
tokens, so the task outgrows the window halfway; it died at step 8 when the running turn was
one strict block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai

from tests.clients.conftest import TASK, AgentFactory, never_shown
from tests.clients.scripted import RECALL

MODEL = "gpt-4.1"
WINDOW = 24_000
STEPS = 20


async def test_one_run_of_twenty_steps_completes(make_agent: AgentFactory) -> None:
    agent = make_agent(WINDOW, steps=STEPS, models=[MODEL])
    await run_task(agent)
    forwarded = agent.forwarded("responses")
    assert len(forwarded) == STEPS + 1
    # The window forced trimming, and every request kept the task.
    assert len(forwarded[-1]["input"]) < 2 * STEPS
    task = {"content": TASK, "role": "user"}
    # The task first, or after the ledger of the steps a cut removed.
    assert all(
        b["input"][0] == task
        or (b["input"][0]["content"].startswith("[Context ledger") and b["input"][1] == task)
        for b in forwarded
    )


async def test_with_recall_it_recalls_instead_of_re_running_and_never_sees_the_tool(
    make_agent: AgentFactory,
) -> None:
    """Steps 9, 12, ... need the output of the step six before (cleared by then): with
    ``recall: true`` the proxy answers the model's recall calls itself."""
    agent = make_agent(WINDOW, steps=STEPS, models=[MODEL], policy={"recall": True}, lag=6, every=3)
    await run_task(agent)
    assert agent.script.recalls >= 3
    assert agent.script.reruns == 0
    never_shown(agent, RECALL)


async def run_task(agent: Any, steps: int = STEPS) -> None:
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the task's directory."""
        return (agent.work / Path(path).name).read_text()

    async with openai.AsyncOpenAI(
        base_url=f"{agent.proxy_url}/v1", api_key="sk-test", max_retries=0
    ) as client:
        coder = Agent(
            name="coder",
            instructions="You are a careful agent. Read what you are asked to read.",
            tools=[read_file],
            model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        )
        result = await Runner.run(coder, TASK, max_turns=steps + 5)
        assert result.final_output.startswith(f"Done after {steps} steps")
        assert not agent.script.refused
