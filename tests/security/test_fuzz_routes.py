"""20,000 mutated bodies over every fitted route (chat, Responses, Messages, legacy
completions): whatever the body, the answer is the upstream's or a 4xx in the client's own
shape, never a 5xx. Seeded, so a failure names a body that can be replayed."""

from __future__ import annotations

import random
from typing import Any

import httpx
import orjson
import pytest
import respx

from tests.proxy.upstreams.test_forwarding import BASE, OK, running

PER_ROUTE = 5000
SEEDS: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "model": "m",
        "messages": [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
            {"role": "user", "content": "go"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "max_tokens": 64,
    },
    "/v1/responses": {
        "model": "m",
        "instructions": "be brief",
        "input": [
            {"type": "message", "role": "developer", "content": "dev"},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xyz"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "out"},
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "max_output_tokens": 64,
    },
    "/v1/messages": {
        "model": "m",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "o"}]},
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    },
    "/v1/completions": {"model": "m", "prompt": "once upon a time", "max_tokens": 16},
}  # fmt: skip

WHITESPACE = [
    " " * 1_000_000,
    " " * 300_000,
    "\n" * 200_000,
    "\t \n" * 100_000,
    "\u3000" * 50_000,
    "",
]
SCALARS: list[Any] = [None, True, False, 0, -1, 2**63, 1.5e308, "", "x", [], {}, [None], {"": None}]


def mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """One random change somewhere in ``value``."""
    roll = rng.random()
    if depth > 6 or roll < 0.15:
        return rng.choice(
            SCALARS + WHITESPACE[-1:] + ([rng.choice(WHITESPACE)] if rng.random() < 0.02 else [])
        )
    if isinstance(value, dict) and value:
        out = dict(value)
        key = rng.choice(list(out))
        action = rng.random()
        if action < 0.2:
            del out[key]
        elif action < 0.3:
            key = rng.choice(["contextwarden", "role", "type", "content", "function", "model", "x"])
            out[key] = rng.choice(SCALARS)
        else:
            out[key] = mutate(out[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value:
        out_list = list(value)
        i = rng.randrange(len(out_list))
        action = rng.random()
        if action < 0.15:
            del out_list[i]
        elif action < 0.25:
            out_list.insert(i, rng.choice(out_list))
        elif action < 0.3:
            out_list = out_list * rng.randint(2, 40)
        else:
            out_list[i] = mutate(out_list[i], rng, depth + 1)
        return out_list
    if isinstance(value, str) and rng.random() < 0.1:
        return rng.choice(WHITESPACE)
    return rng.choice(SCALARS)


def bodies(path: str, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(PER_ROUTE):
        body: Any = SEEDS[path]
        for _ in range(rng.randint(1, 3)):
            body = mutate(body, rng)
        raw = orjson.dumps(body)
        if rng.random() < 0.01:
            raw = raw[: rng.randrange(len(raw) + 1)]  # truncated JSON
        out.append(raw)
    return out


@pytest.mark.slow
@respx.mock
async def test_no_body_gets_a_5xx_on_any_fitted_route() -> None:
    for path in ("/chat/completions", "/responses", "/messages", "/completions"):
        respx.post(f"{BASE}{path}").mock(return_value=httpx.Response(200, json=OK))
    config = {
        "upstreams": {
            "u": {"base_url": BASE, "apis": ["chat_completions", "responses", "messages"]}
        },
        "models": {"m": {"context_window": 4000, "tokenizer": "o200k_base"}},
        "policies": {"default": {"summarize": False}},
    }
    failures: list[tuple[str, int, bytes]] = []
    total = 0
    async with running(config) as c:
        for seed, path in enumerate(SEEDS):
            for raw in bodies(path, seed):
                answer = await c.post(
                    path, content=raw, headers={"content-type": "application/json"}
                )
                total += 1
                if answer.status_code >= 500 or not answer.content.startswith(b"{"):
                    failures.append((path, answer.status_code, raw[:300]))
    assert total == 4 * PER_ROUTE
    assert failures == [], failures[:5]
