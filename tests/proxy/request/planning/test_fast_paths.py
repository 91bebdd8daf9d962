"""The request path's shortcuts (#27) answer exactly what the long way answers.

- A compact body, written exactly as orjson writes its payload, skips the duplicate-key scan:
  it cannot hold a duplicate. A compact body *with* a duplicate is not what orjson writes, so
  it still meets the scan.
- A message's digest is looked up by its bytes once made: the same digest as made afresh, in
  a memo of bounded size.
- The embedded store commits without an fsync each (WAL, synchronous NORMAL).
- A conversation's next request reuses the counts of the messages its last one held in the
  same places: the same counts as made afresh, and only the other messages are priced.
- A large request goes to a worker thread to be counted and fitted only for what it has that
  its conversation's last request did not send: an agent's next step stays on the event loop.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import BadRequest
from proxy.formats.base import parse_json, reject_duplicate_keys
from proxy.request import conversations
from proxy.request.conversations import message_digest
from proxy.request.reused_counts import RecentCounts
from proxy.stores.sqlite import SqliteStore
from strategies.bounded_memory import DIGEST_ENTRY, DigestMemo
from strategies.checkpoints import chain
from strategies.checkpoints.chain import prefix_chain
from strategies.tokens import MemoCounter, count_prompt, each_message

KEYS = ("model", "messages", "role", "content", "tool_call_id", "name", "stream", "other")
text = st.text(max_size=20)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), text)
message = st.dictionaries(st.sampled_from(KEYS), scalar, min_size=1, max_size=5)
payload = st.fixed_dictionaries(
    {"model": text, "messages": st.lists(message, min_size=1, max_size=6)},
    optional={"stream": st.booleans(), "tools": st.lists(st.dictionaries(text, scalar))},
)


def compact(pairs: list[tuple[str, Any]]) -> bytes:
    """A JSON object with the given pairs, duplicates kept, written compactly."""
    return b"{" + b",".join(orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in pairs) + b"}"


@settings(max_examples=200, deadline=None)
@given(payload)
def test_a_body_written_as_orjson_writes_it_passes(value: dict[str, Any]) -> None:
    body = orjson.dumps(value)
    assert parse_json(body) == value
    reject_duplicate_keys(body, orjson.loads(body))


@settings(max_examples=200, deadline=None)
@given(payload, st.integers(0, 5), st.sampled_from(("model", "role", "content")), scalar)
def test_a_compact_body_with_a_duplicate_watched_key_is_refused(
    value: dict[str, Any], where: int, key: str, extra: Any
) -> None:
    """The duplicate goes into the root (``model``) or into one message, written as compactly
    as orjson writes: the shortcut must not let it through."""
    messages = value["messages"]
    if key == "model":
        body = compact([*value.items(), ("model", extra)])
    else:
        i = where % len(messages)
        target = messages[i]
        pairs = [*target.items(), (key, extra)]
        if key not in target:
            pairs.append((key, extra))  # the key twice even where the message lacked it
        written = [orjson.dumps(m) for m in messages]
        written[i] = compact(pairs)
        rest = [(k, v) for k, v in value.items() if k != "messages"]
        body = compact(rest)[:-1] + (b"," if rest else b"") + b'"messages":['
        body += b",".join(written) + b"]}"
    with pytest.raises(BadRequest, match="appears twice"):
        reject_duplicate_keys(body, orjson.loads(body))


def test_a_body_too_deep_to_write_back_is_refused_by_length_not_count() -> None:
    deep = b"[" * 300 + b"]" * 300
    body = b'{"model": "m", "messages": ' + deep + b"}"
    with pytest.raises(BadRequest, match="nested more than"):
        parse_json(body)
    # Short bodies cannot be that deep and are not written back at all.
    assert parse_json(b'{"a": [[1]]}') == {"a": [[1]]}


def test_a_remembered_digest_is_the_one_made_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "x", "cache_control": {}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out " * 400},
    ]
    monkeypatch.setattr(conversations, "_DIGESTS", DigestMemo())
    first = [message_digest(m) for m in messages]
    again = [message_digest(m) for m in messages]  # from the memo
    made = prefix_chain(messages)
    assert prefix_chain(messages) == made
    monkeypatch.setattr(conversations, "_DIGESTS", DigestMemo())
    monkeypatch.setattr(chain, "_DIGESTS", DigestMemo())
    assert [message_digest(m) for m in messages] == first == again
    assert prefix_chain(messages) == made
    assert first[0] == first[1]  # one text block with a breakpoint is the string
    assert len(set(first)) == 3


@given(st.lists(st.binary(max_size=300), max_size=60), st.integers(200, 3000))
def test_the_digest_memo_is_bounded_and_exact(values: list[bytes], limit: int) -> None:
    memo = DigestMemo(limit)
    for raw in values:
        assert memo.digest(raw) == hashlib.blake2b(raw, digest_size=16).digest()
        assert memo.held <= limit
        generations = (memo._memo._young, memo._memo._old)
        held = [k for generation in generations for k in generation]
        assert len(held) == len(set(held))  # each held once
        assert memo.held == sum(len(k) + DIGEST_ENTRY for k in held)
    assert len(memo) <= len(set(values))


def test_the_message_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    memo = DigestMemo(10_000)
    monkeypatch.setattr(conversations, "_DIGESTS", memo)
    for k in range(200):
        message_digest({"role": "user", "content": f"{k} " + "x" * 200})
    assert 0 < memo.held <= 10_000
    assert 0 < len(memo) < 200


async def test_the_store_commits_without_an_fsync_each(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "cw.db", 3600, 100)
    try:
        await store.put_blob("k", b"v", 60)
        assert await store.get_blob("k") == b"v"
        level = await store._run(lambda db: db.execute("PRAGMA synchronous").fetchone()[0])
        assert level == 1  # NORMAL
        mode = await store._run(lambda db: db.execute("PRAGMA journal_mode").fetchone()[0])
        assert mode == "wal"
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "cw.db") as db:  # committed: another connection reads it
        assert db.execute("SELECT value FROM blobs WHERE key='k'").fetchone()[0] == b"v"


def _agent(steps: int, seed: int = 3) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    messages.append({"role": "user", "content": f"task {seed}"})
    for k in range(steps):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k} " * k})
    return messages


class Tally:
    """A counter that says how many messages it priced."""

    priming = 3

    def __init__(self) -> None:
        self.priced = 0

    def message(self, message: dict[str, Any]) -> int:
        self.priced += 1
        return 4 + len(orjson.dumps(message)) // 4

    def tools(self, tools: object, functions: object) -> int:
        return 0


@given(st.integers(1, 12), st.integers(0, 4), st.integers(0, 30))
def test_reused_counts_are_the_counts_made_afresh(steps: int, more: int, edit: int) -> None:
    """The next request grows, or rewrites one message: every count equals a fresh one, and
    only the messages not held by the last request in the same place are priced."""
    recent, tally = RecentCounts(), Tally()
    first = orjson.loads(orjson.dumps(_agent(steps)))
    memo = MemoCounter(tally)
    recent.seed("k", tally, first, memo)
    counts = each_message(memo, first)
    total = sum(counts) + memo.priming
    recent.keep("k", tally, first, counts, 100)
    assert tally.priced == len(first)
    second = orjson.loads(orjson.dumps(_agent(steps + more)))  # new objects, equal values
    changed = edit % len(second)
    if edit >= len(second):
        changed = len(second)  # nothing edited
    else:
        second[changed] = {**second[changed], "content": "edited"}
    tally.priced = 0
    memo = MemoCounter(tally)
    same = len(recent.seed("k", tally, second, memo))
    assert same == min(changed, len(first))
    assert count_prompt(memo, second) == count_prompt(Tally(), second)
    assert tally.priced == len(second) - same
    assert total == count_prompt(Tally(), first)


def test_a_message_equal_in_python_but_not_in_json_is_priced_again() -> None:
    """``1`` and ``true``, ``1`` and ``1.0``: equal values, different text, different counts."""
    recent, tally = RecentCounts(), Tally()
    first = [{"role": "user", "content": "a", "n": 1}, {"role": "user", "content": "b", "x": 1}]
    counts = each_message(MemoCounter(tally), first)
    recent.keep("k", tally, first, counts, 100)
    second = [{**first[0]}, {"role": "user", "content": "b", "x": 1.0}]
    assert recent.seed("k", tally, second, MemoCounter(tally)) == counts[:1]
    third = [{"role": "user", "content": "a", "n": True}, first[1]]
    assert recent.seed("k", tally, third, MemoCounter(tally)) == []


def test_counts_are_kept_per_key_and_counter_and_bounded() -> None:
    recent, a, b = RecentCounts(max_bytes=1000), Tally(), Tally()
    messages = _agent(3)
    counts = each_message(MemoCounter(a), messages)
    recent.keep("k", a, messages, counts, 400)
    assert recent.seed("other", a, messages, MemoCounter(a)) == []
    assert recent.seed("k", b, messages, MemoCounter(b)) == []  # another model's counter
    assert recent.seed("k", a, messages, MemoCounter(a)) == counts
    for n in range(5):  # 5 x 400 bytes over a 1000-byte memory: the oldest go
        recent.keep(f"k{n}", a, messages, counts, 400)
    assert recent.seed("k", a, messages, MemoCounter(a)) == []
    assert recent.seed("k4", a, messages, MemoCounter(a)) == counts
    recent.keep("huge", a, messages, counts, 5000)  # larger than the memory: not kept
    assert recent.seed("huge", a, messages, MemoCounter(a)) == []


def _planned(proxy: tuple[Any, Any, Any], model: str, messages: list[Any]) -> tuple[Any, list[str]]:
    """A request's plan by ``proxy`` (its models, planner and items memory), and the functions
    the planner ran in a worker thread for it."""
    import asyncio

    from starlette.datastructures import Headers

    from proxy.edge.auth import Principal
    from proxy.edge.intake import build_request
    from proxy.formats.chat import CHAT

    models, planner, recent = proxy
    settings = planner.settings
    who = Principal(team="default", config=settings.teams["default"], forward_client_auth=False)
    body = orjson.dumps({"model": model, "messages": messages})
    req = build_request(body, Headers(), settings, models, who, CHAT, None, recent)
    threaded: list[str] = []
    real = asyncio.to_thread

    async def spy(fn: Any, *args: Any, **kwargs: Any) -> Any:
        threaded.append(fn.__name__)
        return await real(fn, *args, **kwargs)

    async def run() -> Any:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(asyncio, "to_thread", spy)
            return await planner.plan_first(req)

    return asyncio.run(run()), threaded


def test_only_what_is_new_is_counted_and_fitted_in_a_worker_thread() -> None:
    """A 260 KB conversation: its first request is counted and fitted in a worker thread (its
    text is all new: tokenizing it releases the interpreter); its next step, two messages more,
    on the event loop, with the same plan as a proxy that had never seen it; a model whose
    counts were not kept counts in the worker again."""
    from proxy.config.settings import load_settings
    from proxy.formats.reused_items import RecentItems
    from proxy.request.planning.off_loop import INLINE_BYTES
    from proxy.request.planning.planner import Planner
    from proxy.windows.models import build_models

    settings = load_settings(
        None,
        models={
            "fits": {"context_window": 200_000, "tokenizer": "o200k_base"},
            "fits-too": {"context_window": 200_000, "tokenizer": "o200k_base"},
            "over": {"context_window": 20_000, "tokenizer": "o200k_base"},
        },
        policies={"default": {"summarize": False}},
    )
    history: list[Any] = [{"role": "system", "content": "You are an agent."}]
    for n in range(120):
        history.append({"role": "user", "content": f"step {n}: " + f"token{n} word " * 180})
        history.append({"role": "assistant", "content": f"done {n}"})
    grown = [*history, {"role": "user", "content": "one more"}]
    assert len(orjson.dumps(history)) > 4 * INLINE_BYTES

    def proxy() -> tuple[Any, Any, Any]:
        return build_models(settings), Planner(settings=settings, compactor=None), RecentItems()

    over = ["each_message", "reserve", "fit", "add_ledger"]  # the ledger's reading too
    for model, threaded_first in (("fits", ["each_message"]), ("over", over)):
        warm = proxy()
        _, threaded = _planned(warm, model, history)
        assert threaded == threaded_first
        second, threaded = _planned(warm, model, grown)
        assert threaded == []
        afresh, threaded = _planned(proxy(), model, grown)
        assert threaded == threaded_first
        assert (second.body, second.tokens_after, second.actions) == (
            afresh.body,
            afresh.tokens_after,
            afresh.actions,
        )
        if model == "fits":
            other, threaded = _planned(warm, "fits-too", grown)
            assert threaded == ["each_message"]  # the items are known, their counts are not
            assert other.tokens_after == second.tokens_after


class Answers:
    """An upstream that answers every request at once (a chat completion with no usage)."""

    async def send(self, upstream: Any, method: str, url: str, headers: Any, content: Any) -> Any:
        from proxy.upstreams.forwarding import Reply

        body = orjson.dumps({"id": "c", "object": "chat.completion", "choices": []})
        return Reply(status=200, headers=[("content-type", "application/json")], body=body)

    async def aclose(self) -> None:
        pass


async def test_a_counted_prompt_far_under_the_limit_writes_no_fingerprint(
    tmp_path: Path,
) -> None:
    """An estimated model's calibration wants exact counts, so its small requests are counted
    rather than passed on the byte bound; far under the limit, their fingerprints stay in
    memory (no store write per request), as the byte bound's do. Near it, they are kept."""
    import httpx

    from proxy.app import create_app
    from proxy.config.settings import load_settings

    models = {"est": {"context_window": 100_000, "tokenizer": "estimate"}}
    app = create_app(load_settings(None, data_dir=str(tmp_path), models=models), Answers())
    async with app.router.lifespan_context(app):
        prefixes = app.state.runtime.prefixes
        written: list[str] = []
        original = prefixes._write
        prefixes._write = lambda key, f, owner: (written.append(key), original(key, f, owner))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            small = {"model": "est", "messages": [{"role": "user", "content": "hi"}]}
            answer = await c.post("/v1/chat/completions", json=small)
            assert answer.headers["x-contextwarden-count"] == "estimate"  # counted
            await prefixes.drain()  # fingerprints are finished after the answer
            assert written == []
            large = {"model": "est", "messages": [{"role": "user", "content": "word " * 60_000}]}
            await c.post("/v1/chat/completions", json=large)
            await prefixes.drain()
            assert len(written) == 1
