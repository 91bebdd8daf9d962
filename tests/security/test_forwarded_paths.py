"""Forwarded paths: a team's key reaches only model-serving paths, only with its own models,
routed by model, and every forwarded request is counted for the team."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import (
    ADMIN_KEY,
    OTHER_KEY,
    TEAM_KEY,
    Capture,
    ProxyFactory,
    keys_config,
)

ORG_WIDE = [
    ("GET", "/v1/files"),
    ("POST", "/v1/files"),
    ("GET", "/v1/files/file-1/content"),
    ("POST", "/v1/batches"),
    ("GET", "/v1/batches/b1"),
    ("POST", "/v1/fine_tuning/jobs"),
    ("GET", "/v1/vector_stores"),
    ("POST", "/v1/vector_stores/vs_1/files"),
    ("POST", "/v1/assistants"),
    ("GET", "/v1/organization/usage"),
    ("GET", "/v1/responses/resp_1"),
]


@pytest.mark.parametrize(("method", "path"), ORG_WIDE)
def test_org_wide_paths_are_refused_to_teams(
    method: str, path: str, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(OTHER_KEY) as c:  # a team with no model limits
        kwargs: dict[str, Any] = {} if method == "GET" else {"json": {"model": "gpt-4o"}}
        response = c.request(method, path, **kwargs)
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "path_not_allowed"
    assert capture.seen == []


def test_an_operator_can_allow_an_org_wide_path(capture: Capture, make_proxy: ProxyFactory) -> None:
    proxy = make_proxy(**keys_config(capture, forward_paths=["files", "files/*"]))
    with proxy.client(OTHER_KEY) as c:
        assert c.get("/v1/files").status_code == 200
    assert capture.paths == [b"/v1/files"]


MODEL_SERVING = [
    "/v1/embeddings",
    "/v1/moderations",
    "/v1/completions",
    "/v1/images/generations",
    "/v1/audio/speech",
    "/v1/responses",
    "/v1/responses/input_tokens",
]


@pytest.mark.parametrize("path", MODEL_SERVING)
def test_model_serving_paths_check_the_teams_models(
    path: str, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(TEAM_KEY) as c:
        refused = c.post(path, json={"model": "gpt-4o-mini", "input": "x", "prompt": "x"})
        nameless = c.post(path, json={"input": "x"})
        allowed = c.post(path, json={"model": "gpt-4o", "input": "x", "prompt": "x"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "model_not_allowed"
    fitted = path in ("/v1/completions", "/v1/responses")  # fitted: no model is bad input
    assert nameless.status_code == (400 if fitted else 403)  # else: a limited team names one
    assert allowed.status_code == 200
    assert allowed.headers["x-contextwarden-actions"] == ("none" if fitted else "not-fitted")
    assert len(capture.seen) == 1
    assert capture.seen[0].headers["authorization"] == "Bearer sk-operator-secret-0000"


def test_forwarded_requests_are_counted_per_team(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(TEAM_KEY) as c:
        c.post("/v1/embeddings", json={"model": "gpt-4o", "input": "x"})
        c.post("/v1/embeddings", json={"model": "gpt-4o-mini", "input": "x"})
        c.get("/v1/files")
    with proxy.client(ADMIN_KEY) as admin:
        stats = admin.get("/admin/stats").json()["teams"]["limited"]
        metrics = admin.get("/metrics").text
    assert stats["requests"] == 3
    assert stats["unfitted"] == 3
    assert 'contextwarden_unfitted_requests_total{path="embeddings",team="limited"} 2.0' in metrics
    assert 'contextwarden_unfitted_requests_total{path="other",team="limited"} 1.0' in metrics


def test_a_model_reaches_its_own_upstream_on_every_path(
    capture: Capture, attacker: Capture, make_proxy: ProxyFactory
) -> None:
    # `attacker` plays a second, legitimate upstream here: the model's own.
    config = keys_config(capture)
    config["upstreams"]["local"] = {"base_url": f"{attacker.url}/v1"}
    config["default_upstream"] = "main"
    config["models"]["local-model"] = {"upstream": "local", "context_window": 4000}
    proxy = make_proxy(**config)
    with proxy.client(OTHER_KEY) as c:
        for path in ("/v1/completions", "/v1/embeddings", "/v1/responses"):
            body = {"model": "local-model", "input": "x", "prompt": "x"}
            assert c.post(path, json=body).status_code == 200
        c.post("/v1/embeddings", json={"model": "gpt-4o", "input": "x"})
    assert attacker.paths == [b"/v1/completions", b"/v1/embeddings", b"/v1/responses"]
    assert capture.paths == [b"/v1/embeddings"]
    # The upstream without a configured key never sees a team's contextwarden key either.
    assert all("authorization" not in s.headers for s in attacker.seen)


def test_passthrough_with_the_clients_own_key_forwards_any_path(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(upstreams={"main": {"base_url": f"{capture.url}/v1"}})
    with proxy.client("sk-the-clients-own") as c:
        assert c.get("/v1/files").status_code == 200
    assert capture.seen[0].headers["authorization"] == "Bearer sk-the-clients-own"
