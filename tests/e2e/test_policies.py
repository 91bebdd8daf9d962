"""Policies from config, driven through the proxy by the openai SDK."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.e2e.conftest import StackFactory
from tests.strategies.invariants import assert_tool_pairs_intact

RAG = {
    "rules": [
        {
            "id": "documents",
            "match": {"role": "system", "content_regex": "^<doc"},
            "tier": "rag",
            "strategy": "drop",
            "inject_into_system": "xml",
        }
    ]
}


def rag_messages(doc_words: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the documents."},
        {"role": "system", "content": "<doc>" + "fact " * doc_words + "</doc>"},
    ]
    for i in range(30):
        msgs += [
            {"role": "user", "content": f"q{i} " * 20},
            {"role": "assistant", "content": f"a{i} " * 20},
        ]
    msgs.append({"role": "user", "content": "Summarise the documents."})
    return msgs


def test_rag_policy_keeps_documents_whole_or_drops_them(make_stack: StackFactory) -> None:
    models = {"rag-model": {"context_window": 1024, "tokenizer": "o200k_base", "policy": "rag"}}
    stack = make_stack(models=models, policies={"rag": RAG})
    raw = stack.client.chat.completions.with_raw_response.create(
        model="rag-model", messages=rag_messages(50), max_tokens=64
    )  # type: ignore[arg-type]
    assert raw.http_response.status_code == 200
    sent = stack.received[-1]["messages"]
    assert "<fact>&lt;doc&gt;fact" in sent[0]["content"]
    assert sum(1 for m in sent if m["role"] == "system") == 1
    stack.client.chat.completions.create(
        model="rag-model", messages=rag_messages(2000), max_tokens=64
    )  # type: ignore[arg-type]
    sent = stack.received[-1]["messages"]
    assert "fact fact" not in str(sent)
    assert sent[0]["content"] == "Answer from the documents."
    for payload in stack.received:
        assert stack.upstream_count(payload) + 64 <= stack.window


def broken_agent_history() -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Run it."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "Interrupted! Try again."},  # the result never came
    ]


def test_interrupted_agent_history_is_repaired_when_the_policy_says_so(
    make_stack: StackFactory,
) -> None:
    models = {
        "agent": {"context_window": 4096, "tokenizer": "o200k_base", "policy": "agent"},
        "plain": {"context_window": 4096, "tokenizer": "o200k_base"},
    }
    stack = make_stack(models=models, policies={"agent": {"repair_tool_calls": True}})
    with pytest.raises(
        openai.BadRequestError, match="tool_call_ids did not have response messages"
    ):
        stack.client.chat.completions.create(model="plain", messages=broken_agent_history())  # type: ignore[arg-type]
    raw = stack.client.chat.completions.with_raw_response.create(
        model="agent", messages=broken_agent_history()
    )  # type: ignore[arg-type]
    assert raw.http_response.status_code == 200
    assert raw.headers["x-contextwarden-actions"] == "repair_tool_calls"
    sent = stack.received[-1]["messages"]
    assert_tool_pairs_intact(sent)
    assert sent[3]["content"].startswith("operation cancelled")
