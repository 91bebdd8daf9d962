"""Sticky cuts: does a trimmed conversation keep its cached prefix? Five families of growing
conversations, each through the real proxy (summaries on) in front of the strict demo upstream.

    chat         a plain chat, turns of uneven size
    agent        tool loops: several calls a step, results of uneven size, the user chiming in
    rag          retrieved documents as leading system messages, dropped least relevant first
                 (relevance_drop), each question about a different document
    multimodal   user turns carrying images (detail: low) beside their text
    cjk          Chinese and Japanese turns (about one token a character)

Every conversation grows to three times a 4096-token window, in about 50 requests (the
red-team harness's 992 requests over 20 conversations: some 240 tokens of growth a request).
For each family: how many consecutive trimmed pairs kept the previous forwarded prompt as
their prefix (by comparing the bodies the upstream received), the proxy's own
``x-contextwarden-prefix`` verdict, requests answered, forwarded prompts over the window
(counted by the upstream), summarizer calls and the summarizer's prompt tokens per 1,000
tokens the conversations grew.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.summaries import settled
from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import WindowCounter, create_upstream

WINDOW = 4096
MODEL = "demo-model"
CALLER = {"authorization": "Bearer sk-bench"}
MAX_TOKENS = 256
GROW_TO = 3 * WINDOW
COUNTER = WindowCounter("o200k_base", 1.0)
Conversation = list[list[dict[str, Any]]]  # the messages of each request, in order

TOPICS = {
    "billing": "invoice refund charge payment card subscription plan price tax receipt",
    "shipping": "parcel courier delivery tracking address warehouse customs label package",
    "security": "password login token breach encryption audit firewall access session",
    "database": "index query table replica migration schema backup transaction shard",
    "hiring": "candidate interview offer salary onboarding recruiter role team contract",
    "weather": "storm rain forecast temperature wind humidity pressure cloud season",
    "garden": "soil seed compost tomato pruning irrigation mulch bloom harvest",
    "travel": "flight hotel visa luggage itinerary airport booking passport train",
}
_FILLER = (
    "the of and to in that it is was for on are as with they be at one have this from "
    "or had by word but what some we can out other were all there when up use your how"
)
FILLER = tuple(_FILLER.split())
CJK = (
    "上下文窗口代理请求摘要检查点缓存前缀历史消息系统用户工具调用结果文件路径函数错误重试"
    "会話の履歴を要約して保存しますキャッシュが効くように前の部分はそのまま送られます"
)


def _words(rng: random.Random, n: int, topic: str | None = None) -> str:
    pool = FILLER + (tuple(TOPICS[topic].split()) * 3 if topic else ())
    return " ".join(rng.choice(pool) for _ in range(n))


def _grown(messages: list[dict[str, Any]]) -> bool:
    return COUNTER.prompt({"messages": messages}) >= GROW_TO


def chat(rng: random.Random) -> Conversation:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    out: Conversation = []
    i = 0
    while not _grown(msgs):
        topic = rng.choice(list(TOPICS))
        question = _words(rng, rng.randint(10, 120), topic)
        msgs.append({"role": "user", "content": f"Q{i}: {question}"})
        out.append(list(msgs))
        answer = _words(rng, rng.randint(40, 250), topic)
        msgs.append({"role": "assistant", "content": f"A{i}: {answer}"})
        i += 1
    return out


TOOLS = ("read_file", "grep", "bash", "edit_file")


def agent(rng: random.Random) -> Conversation:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": f"Task: {_words(rng, 80, 'database')}"},
    ]
    out: Conversation = [list(msgs)]
    step = 0
    while not _grown(msgs):
        calls: list[dict[str, Any]] = []
        for _ in range(rng.choice((1, 1, 1, 1, 2))):
            name = rng.choice(TOOLS)
            args = f'{{"path": "src/mod{step}_{len(calls)}.py"}}'
            calls.append(
                {
                    "id": f"call_{step}_{len(calls)}",
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
            )
        thought = _words(rng, rng.randint(0, 40)) or None
        msgs.append({"role": "assistant", "content": thought, "tool_calls": calls})
        for call in calls:
            result = _words(rng, rng.randint(30, 300), "database")
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if rng.random() < 0.12:  # the user chimes in now and then
            msgs.append({"role": "assistant", "content": _words(rng, rng.randint(20, 80))})
            msgs.append({"role": "user", "content": f"Also: {_words(rng, rng.randint(5, 40))}"})
        out.append(list(msgs))
        step += 1
    return out


def rag(rng: random.Random) -> Conversation:
    topics = list(TOPICS)
    rng.shuffle(topics)
    docs = [
        {"role": "system", "content": f"<doc id={t}> {_words(rng, rng.randint(120, 300), t)}"}
        for t in topics[:6]
    ]
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the documents. Cite the doc id."},
        *docs,
    ]
    out: Conversation = []
    i = 0
    while not _grown(msgs):
        topic = rng.choice(topics[:6])
        question = f"Q{i} about {topic}: {_words(rng, rng.randint(10, 60), topic)}"
        msgs.append({"role": "user", "content": question})
        out.append(list(msgs))
        msgs.append({"role": "assistant", "content": _words(rng, rng.randint(60, 220), topic)})
        i += 1
    return out


def multimodal(rng: random.Random) -> Conversation:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You describe images."}]
    out: Conversation = []
    i = 0
    while not _grown(msgs):
        text = f"Image set {i}: {_words(rng, rng.randint(10, 40))}"
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
        for k in range(rng.choice((1, 1, 2))):
            url = f"https://images.example.com/{i}/{k}.png"
            parts.append({"type": "image_url", "image_url": {"url": url, "detail": "low"}})
        msgs.append({"role": "user", "content": parts})
        out.append(list(msgs))
        msgs.append({"role": "assistant", "content": _words(rng, rng.randint(30, 160))})
        i += 1
    return out


def cjk(rng: random.Random) -> Conversation:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "你是一个有帮助的助手。"}]
    out: Conversation = []
    i = 0
    while not _grown(msgs):
        question = "".join(rng.choice(CJK) for _ in range(rng.randint(15, 100)))
        msgs.append({"role": "user", "content": f"问题{i}:{question}"})
        out.append(list(msgs))
        answer = "".join(rng.choice(CJK) for _ in range(rng.randint(60, 300)))
        msgs.append({"role": "assistant", "content": answer})
        i += 1
    return out


FAMILIES: dict[str, Callable[[random.Random], Conversation]] = {
    "chat": chat,
    "agent tool loops": agent,
    "rag (6 documents)": rag,
    "multimodal": multimodal,
    "cjk": cjk,
}
RAG_POLICY = {
    "extends": "default",
    "rules": [
        {
            "id": "documents",
            "match": {"role": "system", "content_regex": "^<doc"},
            "tier": "rag",
            "strategy": "relevance_drop",
            "inject_into_system": False,
        }
    ],
}


@dataclass
class Tally:
    requests: int = 0
    answered: int = 0
    over_window: int = 0
    pairs: int = 0  # consecutive requests both trimmed
    kept: int = 0  # of those, the previous forwarded prompt is the next one's prefix
    header_kept: int = 0  # the proxy's own verdict on the same pairs
    grown: int = 0
    summarizer_calls: int = 0
    summarizer_tokens: int = 0
    breaks: list[str] = field(default_factory=list)


def _run_family(name: str, conversations: list[Conversation]) -> Tally:
    upstream_app = create_upstream(window=WINDOW)
    tally = Tally()
    policy = "rag" if name.startswith("rag") else "default"
    with BackgroundServer(upstream_app) as upstream, tempfile.TemporaryDirectory() as data:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "models": {MODEL: {"context_window": WINDOW, "tokenizer": "o200k_base"}},
            "policies": {"default": {}, "rag": RAG_POLICY},
            "default_policy": policy,
            "data_dir": data,
        }
        with (
            BackgroundServer(create_app(load_settings(None, **config))) as proxy,
            # A key, as every real client sends: the proxy tells the prefix only to a caller.
            httpx.Client(base_url=proxy.url, timeout=60, headers=CALLER) as client,
        ):
            for conversation in conversations:
                _run_conversation(client, upstream_app, conversation, tally)
            tally.summarizer_calls = settled(lambda: len(upstream_app.state.summaries))
            tally.summarizer_tokens = sum(COUNTER.prompt(s) for s in upstream_app.state.summaries)
    return tally


def _run_conversation(
    client: httpx.Client, upstream: Any, conversation: Conversation, tally: Tally
) -> None:
    previous: list[dict[str, Any]] | None = None
    was_trimmed = False
    first = COUNTER.prompt({"messages": conversation[0]})
    tally.grown += COUNTER.prompt({"messages": conversation[-1]}) - first
    for messages in conversation:
        received = len(upstream.state.received)
        body = {"model": MODEL, "messages": messages, "max_tokens": MAX_TOKENS}
        reply = client.post("/v1/chat/completions", json=body)
        tally.requests += 1
        tally.answered += reply.status_code == 200
        sent = upstream.state.received[received:]
        forwarded = sent[-1]["messages"] if sent else None
        if forwarded is not None and COUNTER.prompt(sent[-1]) + MAX_TOKENS > WINDOW:
            tally.over_window += 1
        trimmed = reply.headers.get("x-contextwarden-actions", "none") != "none"
        if trimmed and was_trimmed and previous is not None and forwarded is not None:
            tally.pairs += 1
            kept = forwarded[: len(previous)] == previous
            tally.kept += kept
            tally.header_kept += reply.headers.get("x-contextwarden-prefix") == "kept"
            if not kept:
                tally.breaks.append(reply.headers.get("x-contextwarden-actions", ""))
        previous, was_trimmed = forwarded, trimmed


def family_rows(quick: bool) -> tuple[list[str], list[list[str]]]:
    """One row per family and a total: prefix kept on consecutive trimmed pairs."""
    per_family = 1 if quick else 4
    rows, total = [], Tally()
    for k, (name, make) in enumerate(FAMILIES.items()):
        rng = random.Random(100 + k)
        tally = _run_family(name, [make(rng) for _ in range(per_family)])
        rows.append(_row(name, tally))
        for attr in ("requests", "answered", "over_window", "pairs", "kept", "header_kept"):
            setattr(total, attr, getattr(total, attr) + getattr(tally, attr))
        for attr in ("grown", "summarizer_calls", "summarizer_tokens"):
            setattr(total, attr, getattr(total, attr) + getattr(tally, attr))
    rows.append(_row("all families", total))
    header = [
        f"family ({per_family} conversations to 3x a 4096-token window)",
        "requests answered",
        "over the window",
        "prefix kept (trimmed pairs)",
        "proxy's header says kept",
        "summarizer calls",
        "summarizer tokens per 1k grown",
    ]
    return header, rows


def _row(name: str, t: Tally) -> list[str]:
    share = t.kept / t.pairs if t.pairs else 1.0
    return [
        name,
        f"{t.answered}/{t.requests}",
        str(t.over_window),
        f"{share:.0%} ({t.kept}/{t.pairs})",
        f"{t.header_kept}/{t.pairs}",
        str(t.summarizer_calls),
        f"{1000 * t.summarizer_tokens / max(1, t.grown):.0f}",
    ]


if __name__ == "__main__":
    import sys

    from bench.__main__ import table

    print(table(*family_rows("--quick" in sys.argv)))
