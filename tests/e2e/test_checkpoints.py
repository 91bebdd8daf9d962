"""Summary checkpoints through the proxy, with the demo upstream as a scripted summarizer."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import openai

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.conftest import MODEL, Stack, StackFactory, first_request_summaries, unseen
from tests.e2e.redis_server import redis_server
from tests.strategies.invariants import assert_tool_pairs_intact

SYSTEM = {"role": "system", "content": "You are the demo assistant."}


def user(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Turn {i}: " + "please keep going with the plan " * 6}


def converse(
    client: openai.OpenAI, turns: int, msgs: list[Any] | None = None
) -> tuple[list[Any], list[Any]]:
    """Drive a growing conversation; returns the messages and each response's headers."""
    msgs = msgs if msgs is not None else [SYSTEM]
    headers = []
    start = sum(1 for m in msgs if m["role"] == "user")
    for i in range(start, start + turns):
        msgs.append(user(i))
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=msgs, max_tokens=64
        )
        headers.append(raw.headers)
        msgs.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    return msgs, headers


def test_forty_turns_summarize_a_bounded_number_of_times(make_stack: StackFactory) -> None:
    stack = make_stack(summarize=True)
    _, headers = converse(stack.client, 40)
    summaries = len(stack.upstream_app.state.summaries)
    # Each checkpoint keeps a quarter of the 944-token budget verbatim and is made again only
    # when the view passes the 75% soft threshold: about 6 turns of growth per summary here.
    # Summarizing a long history takes a few calls, each fitting the 1024-token window.
    assert 1 <= summaries <= 40 // 4, f"{summaries} summarizer calls for 40 requests"
    events = [h.get("x-contextwarden-checkpoint", "") for h in headers]
    assert sum(e.startswith("reused") for e in events) > summaries
    assert all(
        "summarize" in h["x-contextwarden-actions"]
        for h, e in zip(headers, events, strict=True)
        if e
    )
    for payload in stack.received:
        assert stack.upstream_count(payload) + 64 <= stack.window
        assert payload["messages"][0] == SYSTEM
    updates = [
        s
        for s in stack.upstream_app.state.summaries
        if "<previous-summary>" in s["messages"][-1]["content"]
    ]
    assert updates, "later checkpoints update the previous summary instead of re-reading everything"


def test_summary_replaces_old_history_and_recent_turns_stay_verbatim(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(summarize=True)
    msgs, _ = converse(stack.client, 20)
    sent = stack.received[-1]["messages"]
    assert sent[0] == SYSTEM
    # The summary first (it stays as a provider cached it while the conversation grows), then
    # the ledger of what it stands for, quoted (the task: the opening message); both framed
    # records, never system authority.
    assert [m["role"] for m in sent[1:3]] == ["user", "user"]
    assert sent[1]["content"].startswith("[Conversation summary: earlier messages were compacted]")
    assert "## Goal" in sent[1]["content"]
    assert sent[2]["content"].startswith("[Context ledger: quoted by the gateway")
    assert f"Task: {msgs[1]['content'][:40]}" in sent[2]["content"]
    tail = sent[3:]
    assert tail == msgs[len(msgs) - 1 - len(tail) : -1]


def proxy_config(upstream_url: str, data_dir: Path, **extra: Any) -> dict[str, Any]:
    return first_request_summaries(
        {
            "upstreams": {"demo": {"base_url": f"{upstream_url}/v1"}},
            "default_upstream": "demo",
            "models": {MODEL: {"context_window": 1024, "tokenizer": "o200k_base"}},
            "data_dir": str(data_dir),
            **extra,
        }
    )


def test_a_restarted_proxy_reuses_checkpoints_from_its_sqlite_file(tmp_path: Path) -> None:
    app = create_upstream(window=1024)
    with BackgroundServer(app) as upstream:
        config = proxy_config(upstream.url, tmp_path)
        msgs = over_budget_conversation(16)
        with (
            BackgroundServer(create_app(load_settings(None, **config))) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=msgs, max_tokens=64
            )
        assert raw.headers["x-contextwarden-checkpoint"].startswith("created")
        calls = len(app.state.summaries)
        assert (tmp_path / "checkpoints.sqlite3").exists()
        with (
            BackgroundServer(create_app(load_settings(None, **config))) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=msgs, max_tokens=64
            )
        assert raw.headers["x-contextwarden-checkpoint"].startswith("reused")
        assert len(app.state.summaries) == calls


def test_two_proxies_on_one_redis_share_checkpoints(tmp_path: Path) -> None:
    app = create_upstream(window=1024)
    with redis_server(tmp_path) as url, BackgroundServer(app) as upstream:
        shared = {"checkpoints": {"backend": "redis", "url": url}}
        a = create_app(load_settings(None, **proxy_config(upstream.url, tmp_path / "a", **shared)))
        b = create_app(load_settings(None, **proxy_config(upstream.url, tmp_path / "b", **shared)))
        with (
            BackgroundServer(a) as proxy_a,
            BackgroundServer(b) as proxy_b,
            openai.OpenAI(base_url=f"{proxy_a.url}/v1", api_key="sk", max_retries=0) as client_a,
            openai.OpenAI(base_url=f"{proxy_b.url}/v1", api_key="sk", max_retries=0) as client_b,
        ):
            msgs = over_budget_conversation(16)
            first = client_a.chat.completions.with_raw_response.create(
                model=MODEL, messages=msgs, max_tokens=64
            )
            assert first.headers["x-contextwarden-checkpoint"].startswith("created")
            calls = len(app.state.summaries)
            raw = client_b.chat.completions.with_raw_response.create(
                model=MODEL, messages=msgs, max_tokens=64
            )
    assert raw.headers["x-contextwarden-checkpoint"].startswith("reused")
    assert len(app.state.summaries) == calls


def over_budget_conversation(turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [SYSTEM]
    for i in range(turns):
        msgs += [user(i), {"role": "assistant", "content": f"Answer {i}: " + "noted " * 20}]
    msgs.append(user(turns))
    return msgs


def test_concurrent_requests_of_one_conversation_summarize_once(tmp_path: Path) -> None:
    app = create_upstream(window=1024, summary_delay=0.5)
    with BackgroundServer(app) as upstream:
        config = proxy_config(upstream.url, tmp_path)
        proxy_app = create_app(load_settings(None, **config))
        with (
            BackgroundServer(proxy_app) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            msgs = over_budget_conversation(16)
            results: list[Any] = []

            def call() -> None:
                raw = client.chat.completions.with_raw_response.create(
                    model=MODEL, messages=msgs, max_tokens=64
                )
                results.append(raw.headers["x-contextwarden-checkpoint"])

            threads = [threading.Thread(target=call) for _ in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            stats = proxy_app.state.runtime.compactor.stats
    assert len(results) == 6
    assert len({r.split()[1] for r in results}) == 1  # one checkpoint for all of them
    assert stats.created == 1
    assert len(app.state.summaries) <= 4  # one summary, in pieces that fit the small window


def test_failing_summarizer_trips_the_breaker_and_requests_still_succeed(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(summarize=True, policies=unseen())
    stack.upstream_app.state.fail_summaries = True
    calls = []
    for k in range(5):
        # Five conversations: a resent one would replay its cut (sticky) and ask for nothing.
        msgs = over_budget_conversation(16)
        msgs[1] = {"role": "user", "content": f"Conversation {k}."}
        raw = stack.client.chat.completions.with_raw_response.create(
            model=MODEL, messages=msgs, max_tokens=64
        )
        assert raw.http_response.status_code == 200
        assert "truncate_oldest" in raw.headers["x-contextwarden-actions"]
        assert "x-contextwarden-checkpoint" not in raw.headers
        calls.append(len(stack.upstream_app.state.summaries))
    # Three failures open the breaker; the fourth request skips the summarizer; the fifth tries
    # again (half-open).
    assert calls == [1, 2, 3, 3, 4]
    for payload in stack.received:
        assert stack.upstream_count(payload) + 64 <= stack.window


def test_session_memory_is_used_without_an_llm_call(make_stack: StackFactory) -> None:
    stack = make_stack(summarize=True, teams={"default": {"allow_session_memory": True}})
    msgs = over_budget_conversation(16)
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=msgs,  # type: ignore[arg-type]
        max_tokens=64,
        extra_body={"contextwarden": {"session_memory": "The user is planning a trip to Lisbon."}},
    )
    assert raw.headers["x-contextwarden-checkpoint"] == "session-memory"
    sent = stack.received[-1]
    assert "contextwarden" not in sent
    # The session memory as the summary, then the ledger of what it stands for.
    assert "trip to Lisbon" in sent["messages"][1]["content"]
    assert sent["messages"][2]["content"].startswith("[Context ledger")
    assert stack.upstream_app.state.summaries == []
    stack.client.chat.completions.create(
        model=MODEL,
        messages=msgs,
        max_tokens=64,  # type: ignore[arg-type]
        extra_headers={"x-contextwarden-session-memory": "Header memory."},
    )
    assert "Header memory." in stack.received[-1]["messages"][1]["content"]


def test_overflow_recovery_summarizes_from_the_original_transcript(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(summarize=True, count_scale=1.3, policies=unseen())
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=over_budget_conversation(16),
        max_tokens=64,  # type: ignore[arg-type]
    )
    assert raw.http_response.status_code == 200
    assert "summarize" in raw.headers["x-contextwarden-actions"]
    for payload in stack.received[1:]:
        assert_tool_pairs_intact(payload["messages"])


def test_summaries_can_be_turned_off(stack: Stack) -> None:
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=over_budget_conversation(16),
        max_tokens=64,  # type: ignore[arg-type]
    )
    assert raw.headers["x-contextwarden-actions"] == "truncate_oldest,ledger"
    assert stack.upstream_app.state.summaries == []


def test_learned_windows_are_persisted(tmp_path: Path) -> None:
    app = create_upstream(window=1024, count_scale=1.3)
    with BackgroundServer(app) as upstream:
        tight = {"summarize": False, "cache_cut_share": 0}  # cut to the last token: overflows
        config = proxy_config(upstream.url, tmp_path, policies={"default": tight})
        with (
            BackgroundServer(create_app(load_settings(None, **config))) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            first = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=over_budget_conversation(16), max_tokens=64
            )  # type: ignore[arg-type]
        assert int(first.headers["x-contextwarden-retries"]) >= 1
        with (
            BackgroundServer(create_app(load_settings(None, **config))) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            again = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=over_budget_conversation(17), max_tokens=64
            )  # type: ignore[arg-type]
        assert again.headers["x-contextwarden-retries"] == "0"
        assert int(again.headers["x-contextwarden-budget"]) < 1024 - 64 - 16  # the learned window


def test_precompaction_has_the_checkpoint_ready_when_the_limit_is_crossed(tmp_path: Path) -> None:
    app = create_upstream(window=1024, summary_delay=0.3)
    with BackgroundServer(app) as upstream:
        proxy_app = create_app(load_settings(None, **proxy_config(upstream.url, tmp_path)))
        with (
            BackgroundServer(proxy_app) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            stats = proxy_app.state.runtime.compactor.stats
            msgs: list[Any] = [SYSTEM]
            headers = []
            for i in range(30):
                msgs.append(user(i))
                raw = client.chat.completions.with_raw_response.create(
                    model=MODEL, messages=msgs, max_tokens=64
                )
                headers.append(raw.headers)
                msgs.append(
                    {"role": "assistant", "content": raw.parse().choices[0].message.content}
                )
                deadline = time.monotonic() + 10
                while (
                    stats.background > stats.created + stats.failures
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.02)  # the user reads the answer: background work finishes
    assert stats.background >= 1
    crossing = [h for h in headers if "x-contextwarden-checkpoint" in h]
    assert crossing, "the conversation crossed the budget"
    assert all(h["x-contextwarden-checkpoint"].startswith("reused") for h in crossing)


def _summaries(messages: list[Any]) -> list[str]:
    return [
        m["content"]
        for m in messages
        if isinstance(m["content"], str) and m["content"].startswith("[Conversation summary")
    ]


def test_a_later_summary_is_a_layer_after_the_earlier_ones_which_keep_their_bytes(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(summarize=True)
    converse(stack.client, 40)
    views = [_summaries(r["messages"]) for r in stack.received]
    views = [v for v in views if v]
    assert any(len(v) > 1 for v in views), "a re-cut adds a layer instead of rewriting"
    # A new layer comes after the layers before it, which are forwarded with the same bytes
    # (the cached prefix runs through them); they are rewritten as one only past the policy's
    # four layers or their share of the budget.
    grown = [(a, b) for a, b in itertools.pairwise(views) if len(b) > len(a)]
    assert grown and all(b[: len(a)] == a for a, b in grown)
    assert max(len(v) for v in views) <= 4
    assert len({v[0] for v in views}) < len({tuple(v) for v in views})
    for r in stack.received:
        summaries = _summaries(r["messages"])
        assert r["messages"][1 : 1 + len(summaries)] == [
            {"role": "user", "content": s} for s in summaries
        ]
        assert all(s.startswith("[Conversation summary, continued") for s in summaries[1:])
    # The summarizer read the layers before as context and wrote only what came since.
    asked = [s["messages"][-1]["content"] for s in stack.upstream_app.state.summaries]
    assert any("Summarize only the new messages" in a for a in asked)


def test_one_layer_rewrites_the_summary_each_time(make_stack: StackFactory) -> None:
    stack = make_stack(summarize=True, policies={"default": {"summarizer": {"max_layers": 1}}})
    converse(stack.client, 40)
    assert all(len(_summaries(r["messages"])) <= 1 for r in stack.received)
    firsts = {_summaries(r["messages"])[0] for r in stack.received if _summaries(r["messages"])}
    assert len(firsts) > 1, "each checkpoint rewrote the summary"
