"""A body under the byte limit cannot buy unbounded work: its JSON values are capped, every
leaf counted (off the event loop when the cheap bound is over), and punctuation inside strings
does not count against it."""

from __future__ import annotations

import orjson
import pytest

from proxy.edge.admission import json_nodes, node_bound
from tests.security.conftest import OTHER_KEY, Capture, ProxyFactory, keys_config

HEADERS = {"authorization": f"Bearer {OTHER_KEY}", "content-type": "application/json"}


@pytest.mark.slow
def test_a_million_items_is_refused_with_its_count(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    items = [{"role": "user", "content": "x"}] * 1_000_000
    body = orjson.dumps({"model": "gpt-4o", "input": items})
    assert len(body) < 32 * 1024 * 1024
    status, raw = proxy.raw("POST", "/v1/responses", HEADERS, body)
    assert status == 413, raw[:300]
    assert b"more than 100000 JSON values" in raw
    status, _ = proxy.raw("POST", "/v1/embeddings", HEADERS, body)
    assert status == 413
    assert capture.seen == []


@pytest.mark.slow
def test_messages_with_160k_tool_pairs_are_refused(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture, upstreams={"main": {
        "base_url": f"{capture.url}/v1", "api_key_env": "UPSTREAM_KEY", "apis": ["messages"]}}))  # fmt: skip
    pairs = []
    for i in range(160_000):
        call = {"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}}
        pairs += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}"}]},
        ]
    body = orjson.dumps({"model": "gpt-4o", "max_tokens": 8, "messages": pairs})
    headers = {"x-api-key": OTHER_KEY, "content-type": "application/json"}
    status, raw = proxy.raw("POST", "/v1/messages", headers, body)
    assert status == 413, raw[:300]
    assert orjson.loads(raw)["type"] == "error"
    assert capture.seen == []


def test_braces_inside_strings_do_not_count(capture: Capture, make_proxy: ProxyFactory) -> None:
    """Source code is full of braces and commas: the exact count sees one message's six
    values, not 250k nodes."""
    code = "function f() { return [1, {a: 2}]; }\n" * 50_000
    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": code}]})
    assert node_bound(body) > 100_000
    assert json_nodes(body) == 6
    proxy = make_proxy(**keys_config(capture, models={"gpt-4o": {"context_window": 2_000_000}}))
    status, raw = proxy.raw("POST", "/v1/chat/completions", HEADERS, body)
    assert status == 200, raw[:300]
    assert capture.seen[0].body == body
    assert capture.seen[0].headers.get("content-length") == str(len(body))


def test_json_nodes_table() -> None:
    assert json_nodes(b'{"a": [1, {"b": []}], "c": "{[{["}') == 6
    assert json_nodes(b"not json") == -1
    assert node_bound(b'{"c": "{[{["}') == 6
