"""A body field never steers a litellm upstream: not its key, host, headers nor routing."""

from __future__ import annotations

import inspect

import pytest

from proxy.config.catalog import Upstream
from proxy.upstreams.litellm_client import REQUEST_FIELDS, call_arguments, client_message
from tests.security.conftest import OTHER_KEY, UPSTREAM_KEY, Capture, ProxyFactory, keys_config


def litellm_parameters() -> set[str]:
    """Every parameter litellm.acompletion takes that is not an OpenAI request field: its own
    credential, routing, callback and pricing parameters, as litellm lists them."""
    import litellm
    from litellm.types.utils import all_litellm_params

    signature = set(inspect.signature(litellm.acompletion).parameters)
    return (set(all_litellm_params) | signature | {"extra_body"}) - REQUEST_FIELDS - {"kwargs"}


def test_no_litellm_parameter_from_the_body_reaches_litellm() -> None:
    upstream = Upstream(provider="litellm", model="openai/x", base_url="http://real/v1")
    names = litellm_parameters()
    assert {"api_key", "api_base", "base_url", "extra_headers", "model_list"} <= names
    payload = {name: f"http://attacker/{name}" for name in names}
    payload["messages"] = [{"role": "user", "content": "hi"}]
    kwargs = call_arguments(payload, upstream, "sk-operator")
    leaked = {k: v for k, v in kwargs.items() if isinstance(v, str) and "attacker" in v}
    assert leaked == {}
    assert kwargs["api_base"] == "http://real/v1"
    assert kwargs["api_key"] == "sk-operator"
    assert kwargs["model"] == "openai/x"


@pytest.mark.parametrize(
    "field",
    ["api_base", "base_url", "api_key", "extra_headers", "model_list", "custom_llm_provider"],
)
def test_a_body_cannot_send_the_operators_key_elsewhere(
    field: str, capture: Capture, attacker: Capture, make_proxy: ProxyFactory
) -> None:
    config = keys_config(capture)
    config["upstreams"]["claude"] = {
        "provider": "litellm",
        "model": "openai/real-model",
        "base_url": f"{capture.url}/v1",
        "api_key_env": "UPSTREAM_KEY",
    }
    config["models"]["claude"] = {"upstream": "claude", "context_window": 8000}
    proxy = make_proxy(**config)
    value: object = {
        "extra_headers": {"x-forwarded-host": attacker.url},
        "model_list": [{"model_name": "claude", "litellm_params": {"api_base": attacker.url}}],
        "custom_llm_provider": "anthropic",
    }.get(field, f"{attacker.url}/v1")
    body = {"model": "claude", "messages": [{"role": "user", "content": "hi"}], field: value}
    with proxy.client(OTHER_KEY) as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert attacker.seen == []
    assert len(capture.seen) == 1
    assert capture.seen[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert attacker.url not in str(capture.seen[0].headers)


def test_litellm_errors_reach_the_client_without_a_traceback(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    config = keys_config(capture)
    config["upstreams"]["dead"] = {
        "provider": "litellm",
        "model": "openai/real-model",
        "base_url": "http://127.0.0.1:9/v1",  # discard port: nothing listens
        "timeout": 5,
    }
    config["models"]["dead"] = {"upstream": "dead", "context_window": 8000}
    proxy = make_proxy(**config)
    with proxy.client(OTHER_KEY) as c:
        response = c.post("/v1/chat/completions", json={"model": "dead", "messages": [
            {"role": "user", "content": "hi"}]})  # fmt: skip
    assert response.status_code in (502, 504), response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code", "param"}
    assert "Traceback" not in response.text and 'File "' not in response.text


def test_client_message_cuts_tracebacks_and_length() -> None:
    class Noisy(Exception):
        message = 'litellm.APIError: boom\nTraceback (most recent call last):\n  File "x.py"'

    assert client_message(Noisy()) == "litellm.APIError: boom"
    assert len(client_message(Exception("x" * 10_000))) < 2100
    assert client_message(Exception("")) == "Exception"
