"""/metrics stays small whatever clients send, and can require a key."""

from __future__ import annotations

import pytest

from tests.security.conftest import ADMIN_KEY, OTHER_KEY, Capture, ProxyFactory, keys_config


def test_unknown_model_names_do_not_grow_metrics(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(OTHER_KEY) as c:
        for i in range(300):
            c.post("/v1/embeddings", json={"model": f"made-up-{i}", "input": "x"})
            c.post("/v1/chat/completions", json={"model": f"made-up-{i}", "messages": [
                {"role": "user", "content": "x"}]})  # fmt: skip
    with proxy.client(ADMIN_KEY) as c:
        body = c.get("/metrics").text
    assert "made-up" not in body
    assert 'model="other"' in body
    assert len(body) < 60_000


@pytest.mark.parametrize("key", [None, OTHER_KEY, "wrong"])
def test_a_metrics_key_is_required_when_configured(
    key: str | None, capture: Capture, make_proxy: ProxyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METRICS_KEY", "cw-metrics-key")
    proxy = make_proxy(**keys_config(capture, metrics_key_env="METRICS_KEY"))
    with proxy.client(key) as c:
        assert c.get("/metrics").status_code == 401
    for good in ("cw-metrics-key", ADMIN_KEY):
        with proxy.client(good) as c:
            assert c.get("/metrics").status_code == 200


def test_in_keys_mode_metrics_are_never_open_to_a_team_key(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    config = keys_config(capture)
    with make_proxy(**config).client(OTHER_KEY) as c:
        assert c.get("/metrics").status_code == 401  # the admin key opens it, a team's does not
    del config["admin_key_env"]
    with make_proxy(**config).client(OTHER_KEY) as c:
        answer = c.get("/metrics")
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "metrics_disabled"
