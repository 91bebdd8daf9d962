"""A RAG app's usual shape (system prompt, retrieved documents as system messages, question) is
made to fit by a policy that names the leading messages documents (the example config's rag
policy): the least relevant documents go. By default leading system messages are the
application's instructions: kept whole, or the request is refused with an error that names the
policy that would fit it."""

from __future__ import annotations

import openai

from tests.e2e.conftest import MODEL, StackFactory
from tests.strategies.test_relevance_drop import TOPICS, kept_topics, rag

DOCUMENTS = {
    "id": "documents",
    "match": {"position": "leading"},
    "tier": "rag",
    "strategy": "relevance_drop",
}


def test_documents_over_the_budget_are_dropped_by_relevance(make_stack: StackFactory) -> None:
    stack = make_stack(window=2048, policies={"default": {"rules": [DOCUMENTS]}})
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


def test_by_default_leading_messages_are_never_dropped_silently(make_stack: StackFactory) -> None:
    stack = make_stack(window=2048)
    messages = rag("What causes the tides of the oceans?", repeat=40)
    raw = stack.client.chat.completions.with_raw_response.create
    try:
        raw(model=MODEL, messages=messages, max_tokens=100)  # type: ignore[arg-type]
    except openai.BadRequestError as exc:
        error = exc.response.json()["error"]
    else:
        raise AssertionError("the leading system messages were cut")
    assert error["code"] == "context_length_exceeded"
    assert "leading system" in error["message"] and "relevance_drop" in error["message"]
    assert stack.received == []
