"""The proxy knows the prefix: every fitted answer says whether the forwarded prompt kept the
conversation's previous one as its prefix (``x-contextwarden-prefix``), and the metrics count
it with the tokens the provider can serve from its cache."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import MODEL, StackFactory

FILLER = "Describe the next step of the migration plan and what could go wrong with it. "


@pytest.mark.slow
def test_a_long_chat_keeps_its_prefix_between_cuts_and_says_so(make_stack: StackFactory) -> None:
    stack = make_stack(window=2048)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    states, actions = [], []
    for turn in range(200):
        messages.append({"role": "user", "content": f"{turn}: " + FILLER})
        raw = stack.client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, max_tokens=64
        )
        states.append(raw.headers["x-contextwarden-prefix"])
        actions.append(raw.headers["x-contextwarden-actions"])
        messages.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    assert states[0] == "new"
    first_cut = next(k for k, a in enumerate(actions) if a != "none")
    after = states[first_cut + 1 :]
    assert after.count("kept") / len(after) >= 0.9, after
    assert "broken" in after  # a fresh cut now and then, once the replays stop fitting
    # Each state matches what the upstream received.
    for k in range(1, len(stack.received)):
        before, now = stack.received[k - 1]["messages"], stack.received[k]["messages"]
        assert (now[: len(before)] == before) == (states[k] == "kept")


def test_the_metrics_count_prefixes_and_cached_tokens(make_stack: StackFactory) -> None:
    import httpx

    stack = make_stack(window=4096)
    messages: list[dict[str, Any]] = []
    for turn in range(3):
        messages.append({"role": "user", "content": f"{turn}: " + FILLER})
        reply = stack.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=32)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    text = httpx.get(f"{stack.proxy_url}/metrics").text
    assert 'contextwarden_prefix_total{model="demo-model",state="new",team="default"} 1.0' in text
    assert 'contextwarden_prefix_total{model="demo-model",state="kept",team="default"} 2.0' in text
    assert (
        'contextwarden_cached_prompt_tokens_estimated_total{model="demo-model",team="default"}'
        in text
    )


@pytest.mark.slow
def test_the_dashboard_answers_what_trimming_saved_and_what_cache_breaks_cost(
    make_stack: StackFactory, monkeypatch: Any
) -> None:
    import httpx

    monkeypatch.setenv("CW_ADMIN", "admin-key")
    prices = {
        "input_cost_per_token": 3e-6,
        "cache_read_input_token_cost": 3e-7,
        "cache_creation_input_token_cost": 3.75e-6,
    }
    models = {MODEL: {"context_window": 2048, "tokenizer": "o200k_base", "prices": prices}}
    stack = make_stack(window=2048, models=models, admin_key_env="CW_ADMIN")
    messages: list[dict[str, Any]] = []
    # Over a short conversation the cache breaks cost more than trimming saves (an untrimmed,
    # append-only prompt is all cache reads); over a long one, trimming wins.
    for turn in range(150):
        messages.append({"role": "user", "content": f"{turn}: " + FILLER})
        reply = stack.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=64)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    stats = httpx.get(
        f"{stack.proxy_url}/admin/stats", headers={"authorization": "Bearer admin-key"}
    ).json()["teams"]["default"]
    assert stats["prefix_kept"] > 5 * stats["prefix_broken"] > 0
    assert stats["cost_as_forwarded"] < stats["cost_as_sent"]  # untrimmed: as if it fitted
    # Each figure is rounded to 1e-6 dollars.
    assert stats["money_saved"] == pytest.approx(
        stats["cost_as_sent"] - stats["cost_as_forwarded"], abs=2e-6
    )
    assert stats["money_lost_to_cache_breaks"] > 0
    text = httpx.get(f"{stack.proxy_url}/metrics").text
    assert 'contextwarden_prompt_cost_dollars_estimated_total{kind="sent"' in text


def test_fingerprints_outlive_a_restart_through_the_store(tmp_path: Any) -> None:
    """Replicas sharing a store, or a restarted proxy, know the conversation's last prompt
    (for prompts near the limit, which the proxy counts: the fast path's stay in memory)."""
    import openai

    from proxy.app import create_app
    from proxy.config.settings import load_settings
    from proxy.demo.servers import BackgroundServer
    from proxy.demo.upstream import create_upstream

    upstream_app = create_upstream(window=4096)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "0: " + FILLER * 45}]
    with BackgroundServer(upstream_app) as upstream:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1"}},
            "models": {MODEL: {"context_window": 4096, "tokenizer": "o200k_base"}},
            "data_dir": str(tmp_path),
        }
        states = []
        for _ in range(2):  # two proxy lives, one store
            with (
                BackgroundServer(create_app(load_settings(None, **config))) as proxy,
                openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0) as client,
            ):
                raw = client.chat.completions.with_raw_response.create(
                    model=MODEL,
                    messages=messages,
                    max_tokens=32,  # type: ignore[arg-type]
                )
                states.append(raw.headers["x-contextwarden-prefix"])
                answer = raw.parse().choices[0].message.content
                messages += [
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": "1: " + FILLER},
                ]
    assert states == ["new", "kept"]
