"""Leading documents are evicted whole, the least relevant to the question first."""

from __future__ import annotations

from typing import Any

import pytest

from strategies.engine import FitRequest, Policy, fit
from strategies.errors import DoesNotFit
from strategies.relevance_drop import eviction_order
from strategies.rules import CURRENT_RULE, DOCUMENTS_RULE, SYSTEM_RULE
from strategies.tokens import ChatCounter, MemoCounter
from tests.conftest import O200K

COUNTER = MemoCounter(ChatCounter(lambda t: len(O200K.encode_ordinary(t))))
# Leading system messages are strict by default; a RAG policy names them documents.
RAG = Policy(rules=(SYSTEM_RULE, DOCUMENTS_RULE, CURRENT_RULE))
TOPICS = {
    "france": "Paris is the capital of France; the Eiffel Tower stands in Paris. ",
    "bananas": "Bananas are a yellow fruit rich in potassium and grown in the tropics. ",
    "python": "Python is a programming language with dynamic typing and garbage collection. ",
    "tides": "Tides are caused by the gravity of the moon and the sun on the oceans. ",
}


def rag(question: str, repeat: int = 12) -> list[dict[str, Any]]:
    docs = [
        {"role": "system", "content": f"<doc {k}>" + text * repeat} for k, text in TOPICS.items()
    ]
    return [{"role": "system", "content": "Answer from the documents."}, *docs,
            {"role": "user", "content": question}]  # fmt: skip


def kept_topics(messages: list[dict[str, Any]]) -> list[str]:
    return [k for k in TOPICS if any(f"<doc {k}>" in str(m["content"]) for m in messages)]


def test_the_least_relevant_documents_go_first() -> None:
    messages = rag("What is the capital of France, and where is the Eiffel Tower?")
    result = fit(FitRequest(messages=messages, budget=500, counter=COUNTER, policy=RAG))
    assert kept_topics(result.messages)[0] == "france"
    assert result.messages[0]["content"] == "Answer from the documents."
    assert result.messages[-1]["role"] == "user"
    assert result.tokens_after <= 500
    assert any(b.id == "documents" and b.label for b in result.report.blocks)  # type: ignore[union-attr]


@pytest.mark.parametrize("topic", list(TOPICS))
def test_the_relevant_document_survives_whatever_its_position(topic: str) -> None:
    question = {"france": "Tell me about Paris.", "bananas": "Is a banana rich in potassium?",
                "python": "Which programming language has garbage collection?",
                "tides": "What causes the tides of the oceans?"}[topic]  # fmt: skip
    result = fit(FitRequest(messages=rag(question), budget=300, counter=COUNTER, policy=RAG))
    assert kept_topics(result.messages) == [topic]


def test_without_words_to_score_the_oldest_go_first() -> None:
    assert eviction_order(["a doc", "b doc", "c doc"], "") == [0, 1, 2]
    assert eviction_order(["", ""], "anything") == [0, 1]


def test_only_the_system_prompt_and_the_current_turn_are_strict() -> None:
    messages = rag("Tell me about Paris.")
    messages[0]["content"] = "rule " * 800
    with pytest.raises(DoesNotFit):
        fit(FitRequest(messages=messages, budget=400, counter=COUNTER, policy=RAG))


def test_by_default_every_leading_system_message_is_strict() -> None:
    """A guardrail after the persona is the application's instruction, not a document: with
    the default policy it is kept whole or the request is refused, never dropped silently."""
    messages = [
        {"role": "system", "content": "You are a helpful persona."},
        {"role": "system", "content": "SAFETY POLICY: never reveal the keys. " * 20},
        *[{"role": "user" if i % 2 == 0 else "assistant", "content": "old " * 200}
          for i in range(6)],
        {"role": "user", "content": "question " * 300},
    ]  # fmt: skip
    result = fit(FitRequest(messages=messages, budget=800, counter=COUNTER))
    assert result.messages[:2] == messages[:2]
    with pytest.raises(DoesNotFit) as raised:
        fit(FitRequest(messages=messages, budget=400, counter=COUNTER))
    assert raised.value.block_id in ("leading", "newest")
