"""A credential goes only where its caller sent it (R3, R6): every upstream host sees only the
key meant for it, in keys mode and in passthrough. Three capture upstreams: ``main`` (the model
the caller asks for), ``summary`` (a policy's summarizer through another upstream) and ``big``
(a fallback model on another upstream); each records every header it was sent."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.config.settings import ConfigError, load_settings
from tests.security.conftest import (
    BIG_KEY,
    SUMMARY_KEY,
    TEAM_KEY,
    UPSTREAM_KEY,
    Capture,
    ProxyFactory,
)

CALLER_KEY = "sk-caller-own-4444"
ANTHROPIC_CALLER = "sk-ant-caller-5555"
SECRETS = (CALLER_KEY, ANTHROPIC_CALLER, SUMMARY_KEY, BIG_KEY, UPSTREAM_KEY, TEAM_KEY)


def config(main: Capture, summary: Capture, big: Capture, **extra: Any) -> dict[str, Any]:
    """``small`` (a 1,000-token window on main) falls back to ``huge`` (on big); its policy
    summarizes through the summary upstream. Every upstream but main holds a key of its own."""
    return {
        "upstreams": {
            "main": {"base_url": f"{main.url}/v1", "apis": ["chat_completions", "messages"]},
            "summary": {"base_url": f"{summary.url}/v1", "api_key_env": "SUMMARY_KEY"},
            "big": {"base_url": f"{big.url}/v1", "api_key_env": "BIG_KEY"},
        },
        "default_upstream": "main",
        "models": {
            "small": {"context_window": 1000, "tokenizer": "o200k_base"},
            "medium": {"context_window": 1400, "tokenizer": "o200k_base", "policy": "summing"},
            "huge": {"upstream": "big", "context_window": 100_000, "tokenizer": "o200k_base"},
        },
        "policies": {
            "default": {"summarize": False, "fallbacks": ["huge"], "fallback_on_loss": 0.1},
            "summing": {
                "summarizer": {
                    "model": "openai/summary-model",
                    "upstream": "summary",
                    "summarize_unseen": True,
                },
            },
        },
        **extra,
    }


def long_chat(model: str) -> dict[str, Any]:
    turn = "Describe the migration plan and what could go wrong with it, step by step. " * 8
    messages = [{"role": "system", "content": "You are terse."}]
    for i in range(12):
        messages += [
            {"role": "user", "content": f"{i}: {turn}"},
            {"role": "assistant", "content": f"Answer {i}: noted " * 10},
        ]
    messages.append({"role": "user", "content": "and now?"})
    return {"model": model, "messages": messages, "max_tokens": 64}


def sent_keys(capture: Capture) -> set[str]:
    """Every secret any header of any request to ``capture`` carried."""
    return {s for seen in capture.seen for v in seen.headers.values() for s in SECRETS if s in v}


def post(proxy: Any, path: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    status, raw = proxy.raw(
        "POST", path, {"content-type": "application/json", **headers}, orjson.dumps(body)
    )
    return status, raw


def test_passthrough_the_callers_key_reaches_only_the_upstream_it_addressed(
    capture: Capture, summary: Capture, big: Capture, own_keys: None, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**config(capture, summary, big))
    caller = {"authorization": f"Bearer {CALLER_KEY}"}
    status, raw = post(proxy, "/v1/chat/completions", long_chat("small"), caller)
    assert status == 200, raw[:300]  # answered by the fallback
    status, raw = post(proxy, "/v1/chat/completions", long_chat("medium"), caller)
    assert status == 200, raw[:300]  # summarized, then answered by main
    assert big.seen and summary.seen and capture.seen
    assert sent_keys(big) == {BIG_KEY}
    assert sent_keys(summary) == {SUMMARY_KEY}
    assert sent_keys(capture) == {CALLER_KEY}


def test_keys_mode_every_host_sees_only_its_own_key(
    capture: Capture, summary: Capture, big: Capture, own_keys: None, make_proxy: ProxyFactory
) -> None:
    base = config(capture, summary, big, auth="keys", teams={"t": {"key_envs": ["TEAM_KEY"]}})
    base["upstreams"]["main"]["api_key_env"] = "UPSTREAM_KEY"
    proxy = make_proxy(**base)
    caller = {"authorization": f"Bearer {TEAM_KEY}", "cookie": "session=1"}
    for model in ("small", "medium"):
        status, raw = post(proxy, "/v1/chat/completions", long_chat(model), caller)
        assert status == 200, raw[:300]
    assert sent_keys(big) == {BIG_KEY}
    assert sent_keys(summary) == {SUMMARY_KEY}
    assert sent_keys(capture) == {UPSTREAM_KEY}
    assert all("cookie" not in s.headers for c in (capture, big) for s in c.seen)


def test_an_anthropic_key_is_never_resent_as_a_bearer_token(
    capture: Capture, summary: Capture, big: Capture, own_keys: None, make_proxy: ProxyFactory
) -> None:
    """Claude Code's x-api-key to an OpenAI-style upstream serving Messages: the request goes
    with it as it came; the summary (through the request's own upstream, as an OpenAI-style
    call that sends a bearer token) does not carry it."""
    base = config(capture, summary, big)
    base["policies"]["summing"]["summarizer"] = {"summarize_unseen": True}
    proxy = make_proxy(**base)
    body = long_chat("medium")
    body["system"] = body["messages"].pop(0)["content"]
    _, raw = post(proxy, "/v1/messages", body, {"x-api-key": ANTHROPIC_CALLER})
    assert len(capture.seen) >= 2, raw[:300]  # the summary call, then the request
    summaries = [s for s in capture.seen if s.raw_path.endswith(b"/chat/completions")]
    assert summaries, [s.raw_path for s in capture.seen]
    for seen in summaries:
        assert ANTHROPIC_CALLER not in seen.headers.get("authorization", "")
        assert ANTHROPIC_CALLER not in seen.headers.get("x-api-key", "")
    messages = [s for s in capture.seen if s.raw_path.endswith(b"/messages")]
    assert messages and messages[-1].headers.get("x-api-key") == ANTHROPIC_CALLER


@pytest.mark.parametrize("where", ["summarizer", "fallback"])
def test_a_passthrough_config_that_would_send_the_callers_key_elsewhere_is_refused(
    where: str, capture: Capture, summary: Capture, big: Capture, keys: None
) -> None:
    base = config(capture, summary, big)
    del base["upstreams"]["summary" if where == "summarizer" else "big"]["api_key_env"]
    with pytest.raises(ConfigError) as refused:
        load_settings(None, **base)
    message = str(refused.value)
    assert "api_key_env" in message
    assert ("summarizer.upstream 'summary'" if where == "summarizer" else "'huge'") in message
    # With one upstream, or in keys mode, nothing is sent elsewhere: no refusal.
    load_settings(None, **{**base, "auth": "keys", "teams": {"t": {"key_envs": ["TEAM_KEY"]}}})


def test_past_the_start_up_check_the_callers_key_still_stays_with_its_upstream(
    capture: Capture,
    summary: Capture,
    big: Capture,
    keys: None,
    make_proxy: ProxyFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The attack of R3: a summarizer and a fallback on upstreams that hold no key. The
    request path itself never hands them the caller's key (a fallback is not tried, the
    summary goes without it and the request is truncated instead)."""
    import proxy.config.settings

    monkeypatch.setattr(proxy.config.settings, "misdirected_credentials", lambda _: [], False)
    base = config(capture, summary, big)
    for name in ("summary", "big"):
        del base["upstreams"][name]["api_key_env"]
    proxy = make_proxy(**base)
    caller = {"authorization": f"Bearer {CALLER_KEY}"}
    for model in ("small", "medium"):
        status, raw = post(proxy, "/v1/chat/completions", long_chat(model), caller)
        assert status == 200, raw[:300]
    assert sent_keys(big) == set() and sent_keys(summary) == set()
    assert sent_keys(capture) == {CALLER_KEY}


ACCOUNT = {
    "openai-organization": "org-caller",
    "openai-project": "proj_caller",
    "cookie": "session=caller",
}


def test_with_the_proxys_key_the_callers_account_headers_stay_home(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """R6: passthrough, the operator's key held for the upstream."""
    upstream: dict[str, Any] = {"base_url": f"{capture.url}/v1", "api_key_env": "UPSTREAM_KEY"}
    proxy = make_proxy(upstreams={"main": upstream}, models={"gpt-4o": {"context_window": 8000}})
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    for path in ("/v1/chat/completions", "/v1/embeddings"):
        post(proxy, path, body, {"authorization": f"Bearer {CALLER_KEY}", **ACCOUNT})
    assert len(capture.seen) == 2
    for seen in capture.seen:
        assert seen.headers.get("authorization") == f"Bearer {UPSTREAM_KEY}"
        assert not set(ACCOUNT) & set(seen.headers), seen.headers
    # An operator may let one through.
    upstream["caller_headers"] = ["OpenAI-Project"]
    allowed = make_proxy(upstreams={"main": upstream}, models={"gpt-4o": {"context_window": 8000}})
    post(allowed, "/v1/chat/completions", body, ACCOUNT)
    assert capture.seen[-1].headers.get("openai-project") == "proj_caller"
    assert "cookie" not in capture.seen[-1].headers


def test_without_the_proxys_key_the_callers_headers_go_as_before(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """Passthrough with the caller's own key: its account is the caller's to pick."""
    proxy = make_proxy(
        upstreams={"main": {"base_url": f"{capture.url}/v1"}},
        models={"gpt-4o": {"context_window": 8000}},
    )
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    post(proxy, "/v1/chat/completions", body, {"authorization": f"Bearer {CALLER_KEY}", **ACCOUNT})
    assert capture.seen[0].headers.get("openai-organization") == "org-caller"
    assert capture.seen[0].headers.get("authorization") == f"Bearer {CALLER_KEY}"
