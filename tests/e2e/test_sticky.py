"""Sticky cuts: once a growing conversation is trimmed, its next requests replay the cut and
only append, so the provider's cached prefix is kept. What a cut dropped stays dropped, what it
cleared stays cleared with the same bytes, a summary stays the one it was; replicas sharing a
store replay each other's cuts; a budget that grows by a cache grid step is cut afresh."""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from itertools import pairwise, takewhile
from typing import Any

import httpx
import pytest

from bench.families import RAG_POLICY, Conversation, agent, chat, rag
from strategies.microcompact import CLEARED
from tests.e2e.conftest import MODEL, Stack, StackFactory

WINDOW = 4096


@dataclass
class Sent:
    actions: str
    prefix: str
    forwarded: list[dict[str, Any]]


def send(stack: Stack, messages: list[dict[str, Any]], max_tokens: int = 256) -> Sent:
    received = len(stack.received)
    reply = httpx.post(
        f"{stack.proxy_url}/v1/chat/completions",
        json={"model": MODEL, "messages": messages, "max_tokens": max_tokens},
        headers={"authorization": "Bearer sk-test"},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    assert len(stack.received) == received + 1
    forwarded = stack.received[-1]["messages"]
    assert stack.upstream_count(stack.received[-1]) + max_tokens <= stack.window
    return Sent(
        reply.headers["x-contextwarden-actions"], reply.headers["x-contextwarden-prefix"], forwarded
    )


def drive(stack: Stack, conversation: Conversation) -> list[Sent]:
    return [send(stack, messages) for messages in conversation]


def trimmed_pairs(sent: list[Sent]) -> list[tuple[Sent, Sent]]:
    return [(a, b) for a, b in pairwise(sent) if "none" not in (a.actions, b.actions)]


def keeps(a: Sent, b: Sent) -> bool:
    return b.forwarded[: len(a.forwarded)] == a.forwarded


@pytest.mark.parametrize("summarize", [True, False], ids=["summaries", "truncation"])
def test_an_agent_loop_replays_its_cuts_and_keeps_nine_in_ten_prefixes(
    make_stack: StackFactory, summarize: bool
) -> None:
    stack = make_stack(window=WINDOW, summarize=summarize)
    conversation = agent(random.Random(7))
    sent = drive(stack, conversation)
    pairs = trimmed_pairs(sent)
    assert len(pairs) > 20
    replays = [(a, b) for a, b in pairs if "sticky" in b.actions]
    assert len(replays) > len(pairs) / 2, [b.actions for _, b in pairs]
    # A replay forwards exactly the previous prompt plus what the client appended: cleared
    # tool outputs and summaries with the same bytes, and the proxy's header says so.
    for a, b in replays:
        assert keeps(a, b), (a.actions, b.actions)
        assert b.prefix == "kept"
    kept = sum(keeps(a, b) for a, b in pairs)
    assert kept / len(pairs) >= 0.85, (kept, len(pairs))


def test_cleared_tool_outputs_stay_cleared_with_the_same_bytes(make_stack: StackFactory) -> None:
    """An agent session the proxy first sees already over the window (a resumed one) has its old
    tool outputs cleared; its next requests replay the cut: the same placeholders, byte for
    byte, and nothing else rewritten."""
    stack = make_stack(window=WINDOW)
    conversation = agent(random.Random(7))
    start = next(
        k for k, m in enumerate(conversation) if stack.upstream_count({"messages": m}) > 6000
    )
    sent = drive(stack, conversation[start : start + 6])
    assert "tool_result_microcompact" in sent[0].actions
    cleared = [m for m in sent[0].forwarded if str(m.get("content", "")).startswith(CLEARED)]
    assert cleared
    replays = list(takewhile(lambda pair: "sticky" in pair[1].actions, pairwise(sent)))
    assert len(replays) >= 3, [s.actions for s in sent]
    for a, b in replays:
        assert keeps(a, b) and b.prefix == "kept"
    assert stack.raw[len(replays)].count(CLEARED.encode()) == len(cleared)


def test_rag_documents_once_dropped_stay_dropped_while_the_cut_is_replayed(
    make_stack: StackFactory,
) -> None:
    # Six documents of about 1,700 tokens in all, in a window where they do not all fit
    # beside the conversation.
    stack = make_stack(
        window=2560,
        summarize=True,
        policies={"default": {}, "rag": RAG_POLICY},
        default_policy="rag",
    )
    sent = drive(stack, rag(random.Random(3)))

    def docs(s: Sent) -> set[str]:
        return {
            m["content"][:20] for m in s.forwarded if str(m.get("content", "")).startswith("<doc")
        }

    assert any(len(docs(s)) < 6 for s in sent)  # the budget did drop documents
    pairs = trimmed_pairs(sent)
    replays = [(a, b) for a, b in pairs if "sticky" in b.actions]
    assert replays
    for a, b in replays:
        assert docs(b) == docs(a) and keeps(a, b)
    kept = sum(keeps(a, b) for a, b in pairs)
    assert kept / len(pairs) >= 0.85, (kept, len(pairs))


def test_replicas_sharing_a_store_replay_each_others_cuts(make_stack: StackFactory) -> None:
    one = make_stack(window=WINDOW)  # both proxies keep their memory in the same data_dir
    two = make_stack(window=WINDOW)
    conversation = chat(random.Random(11))
    sent = drive(one, conversation[:30])
    assert sent[-1].actions != "none"
    time.sleep(0.5)  # the cut is written to the store in the background
    moved = send(two, conversation[30])
    assert "sticky" in moved.actions
    assert keeps(sent[-1], moved) and moved.prefix == "kept"


def test_a_budget_a_grid_step_larger_is_cut_afresh_and_keeps_more(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(window=WINDOW)
    conversation = chat(random.Random(5))
    tight = [send(stack, messages, max_tokens=2048) for messages in conversation[:30]]
    assert tight[-1].actions != "none"
    same = send(stack, conversation[30], max_tokens=2048)
    assert "sticky" in same.actions
    roomier = send(stack, conversation[31], max_tokens=256)
    assert "sticky" not in roomier.actions and roomier.actions != "none"
    assert len(roomier.forwarded) > len(same.forwarded) + 1  # it kept more than the replay
    assert roomier.prefix == ("kept" if keeps(same, roomier) else "broken")
    # The new cut, made for the larger budget, is the one the next requests replay.
    after = send(stack, conversation[32], max_tokens=256)
    assert "sticky" in after.actions and keeps(roomier, after)


def test_a_policy_without_the_cache_grid_cuts_each_request_afresh(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(window=WINDOW, policies={"default": {"cache_cut_share": 0}})
    sent = drive(stack, chat(random.Random(5))[:40])
    assert any(s.actions != "none" for s in sent)
    assert not any(re.search(r"\bsticky\b", s.actions) for s in sent)


def test_the_dashboard_and_metrics_show_the_share_of_trimmed_requests_that_kept_their_prefix(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CW_ADMIN", "admin-key")
    stack = make_stack(window=WINDOW, admin_key_env="CW_ADMIN")
    sent = drive(stack, chat(random.Random(5)))
    # What the upstream received says which trimmed requests kept the previous prompt.
    kept = sum(b.actions != "none" and keeps(a, b) for a, b in pairwise(sent))
    broken = sum(b.actions != "none" and not keeps(a, b) for a, b in pairwise(sent))
    assert kept > 8 * broken > 0
    stats = httpx.get(
        f"{stack.proxy_url}/admin/stats", headers={"authorization": "Bearer admin-key"}
    ).json()["teams"]["default"]
    assert (stats["trimmed_prefix_kept"], stats["trimmed_prefix_broken"]) == (kept, broken)
    assert stats["trimmed_prefix_kept_share"] == round(kept / (kept + broken), 4)
    text = httpx.get(f"{stack.proxy_url}/metrics").text
    line = 'contextwarden_trimmed_prefix_total{model="demo-model",state="%s",team="default"} %.1f'
    assert line % ("kept", kept) in text and line % ("broken", broken) in text
