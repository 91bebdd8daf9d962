"""``relevance_drop``: documents worth keeping only whole, the least relevant dropped first.

Each message of the block is one document. When the block does not fit, documents are removed
whole in order of relevance to ``query`` (the user's current message, which the engine passes
in), least relevant first, until the rest fits; ties, and documents when there is no query text
to score against, go oldest first. Relevance is BM25 (Okapi) as the ``bm25s`` package computes
it: a well-kept implementation of the standard lexical scorer, with English stop words removed.
"""

from __future__ import annotations

from collections.abc import Sequence

from strategies.messages import Message, iter_text
from strategies.tokens import Counter


class RelevanceDrop:
    name = "relevance_drop"
    label = "dropped least relevant"

    def __init__(self, query: str = "") -> None:
        """``query``: the current user message's text, which ``bind`` fills in per request."""
        self.query = query

    def bind(self, *, query: str, budget: int) -> RelevanceDrop:
        return RelevanceDrop(query)

    def apply(
        self, messages: Sequence[Message], original_tokens: int, limit: int, counter: Counter
    ) -> list[Message]:
        costs = [counter.message(m) for m in messages]
        total = sum(costs)
        dropped: set[int] = set()
        for i in eviction_order(["\n".join(iter_text(m)) for m in messages], self.query):
            if total <= limit:
                break
            dropped.add(i)
            total -= costs[i]
        return [m for i, m in enumerate(messages) if i not in dropped]


def eviction_order(documents: Sequence[str], query: str) -> list[int]:
    """Indices of ``documents``, least relevant to ``query`` first (ties: oldest first)."""
    scores = relevance(documents, query)
    return sorted(range(len(documents)), key=lambda i: (scores[i], i))


def relevance(documents: Sequence[str], query: str) -> list[float]:
    """BM25 score of each document for ``query``; all zero when either side has no words."""
    if not query.strip() or not any(d.strip() for d in documents):
        return [0.0] * len(documents)
    import bm25s  # imported on first use: a few hundred milliseconds, numpy included

    corpus = bm25s.tokenize(list(documents), stopwords="en", show_progress=False)
    if not corpus.vocab:
        return [0.0] * len(documents)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    words = bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0]
    if not words:
        return [0.0] * len(documents)
    return [float(s) for s in retriever.get_scores(words)]
