"""A RAG app's usual shape (system prompt, retrieved documents as system messages, question)
is made to fit by the default policy, with no rules: the least relevant documents go."""

from __future__ import annotations

from tests.e2e.conftest import MODEL, StackFactory
from tests.strategies.test_relevance_drop import TOPICS, kept_topics, rag


def test_documents_over_the_budget_are_dropped_by_relevance(make_stack: StackFactory) -> None:
    stack = make_stack(window=2048)
    messages = rag("What causes the tides of the oceans?", repeat=40)
    assert stack.upstream_count({"messages": messages}) > 2048
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=100,
    )
    assert raw.http_response.status_code == 200
    assert "relevance_drop" in raw.headers["x-contextwarden-actions"]
    sent = stack.received[-1]["messages"]
    assert stack.upstream_count(stack.received[-1]) + 100 <= 2048
    assert "tides" in kept_topics(sent)
    assert len(kept_topics(sent)) < len(TOPICS)
    assert sent[0]["content"] == "Answer from the documents."
    assert sent[-1]["content"] == "What causes the tides of the oceans?"
