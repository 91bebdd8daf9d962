"""proxy/summaries/compactor.py: what it asks of the store, and when it asks nothing."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.config.policies import PolicyConfig
from proxy.summaries.compactor import Compactor
from proxy.summaries.job import Context
from proxy.summaries.llm import Target
from strategies.checkpoints import chain
from strategies.checkpoints.chain import Checkpoint
from strategies.messages import Message
from tests.counters import FixedCounter
from tests.strategies.checkpoints.test_chain import conv

POLICY = PolicyConfig.model_validate({"summarizer": {"soft_threshold": 0.5}})


class RecordingStore:
    """An in-memory checkpoint store that notes each call the compactor makes."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.saved: list[Checkpoint] = []

    async def candidates(self, team: str, conversation: str) -> list[Checkpoint]:
        self.calls.append("candidates")
        return [c for c in self.saved if c.conversation == conversation]

    async def put(self, team: str, checkpoint: Checkpoint, owner: str = "") -> None:
        self.calls.append("put")
        self.saved.append(checkpoint)

    async def acquire(self, key: str, ttl_seconds: float) -> bool:
        self.calls.append("acquire")
        return True

    async def release(self, key: str) -> None:
        self.calls.append("release")


class Writer:
    """The summarizing model: answers every call with the same summary."""

    calls = 0

    async def complete(self, messages: Any, target: Target, max_tokens: int, timeout: float) -> str:
        self.calls += 1
        return "## Goal\nthe gist"


def task(steps: int) -> list[Message]:
    """A running agent task: the system prompt, the task, then ``steps`` tool steps."""
    out: list[Message] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the build."},
    ]
    for k in range(steps):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"file {k}"})
    return out


def context(running: bool) -> Context:
    return Context(
        team="t",
        counter=FixedCounter(10),
        policy=POLICY,
        target=Target("m"),
        reserve=0,
        window=10_000,
        running=running,
    )


async def test_a_running_task_with_nothing_before_it_costs_no_store_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its steps are never summarized: preparing asks nothing of the store once the
    conversation is known, and a cut reads its checkpoints but takes no lock, and digests
    only the conversation's key (its system prompt and task) to find them."""
    digested: list[Message] = []
    digest = chain._digest
    monkeypatch.setattr(chain, "_digest", lambda m: digested.append(m) or digest(m))
    store, writer = RecordingStore(), Writer()
    compactor = Compactor(store, writer)  # type: ignore[arg-type]
    msgs = task(20)  # 410 tokens against a budget of 300: over it, and past the soft limit
    for _ in range(3):
        await compactor.precompact(msgs, 300, context(True))
        await compactor.drain()
    assert store.calls == []
    assert digested == msgs[:2] * 3
    assert await compactor.compact(msgs, 300, context(True)) is None
    assert store.calls == ["candidates"]
    assert digested == msgs[:2] * 4
    assert writer.calls == 0


async def test_a_cut_with_nothing_to_summarize_still_remembers_the_conversation() -> None:
    """Once the task is done and a new one stated, its steps can be summarized: the
    conversation was seen by the cut before, so it is summarized, not truncated as on first
    sight."""
    store, writer = RecordingStore(), Writer()
    compactor = Compactor(store, writer)  # type: ignore[arg-type]
    msgs = task(20)
    assert await compactor.compact(msgs, 300, context(True)) is None
    later = [
        *msgs,
        {"role": "assistant", "content": "Fixed."},
        {"role": "user", "content": "Next?"},
    ]
    made = await compactor.compact(later, 300, context(True))
    assert made is not None and made.event == "created" and writer.calls == 1


async def test_a_conversation_with_old_turns_is_prepared_and_summarized() -> None:
    """The control: the same calls on a chat whose old turns can be summarized read the
    store, take the lock and write the checkpoint."""
    store, writer = RecordingStore(), Writer()
    compactor = Compactor(store, writer)  # type: ignore[arg-type]
    msgs = conv(40)
    await compactor.precompact(msgs, 300, context(False))  # first sight: remembered only
    assert store.calls == []
    await compactor.precompact(msgs, 300, context(False))
    await compactor.drain()
    assert store.calls[:2] == ["candidates", "acquire"]
    assert "put" in store.calls and store.calls[-1] == "release"
    assert writer.calls >= 1
    made = await compactor.compact(msgs, 300, context(False))
    assert made is not None and made.event == "reused"
