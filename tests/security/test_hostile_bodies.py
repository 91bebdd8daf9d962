"""A body under the byte limit cannot buy unbounded work: its JSON values are capped, every
leaf counted (off the event loop when the cheap bound is over), and punctuation inside strings
does not count against it."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=4_000), step=st.integers(min_value=1, max_value=5_000))
def test_node_bound_counts_every_opener_in_any_chunking(body: bytes, step: int) -> None:
    """The bound is one plus the commas, braces and brackets, strings' included, whatever the
    chunk size, so a chunk's edge never loses one."""
    expected = 1 + body.count(b",") + body.count(b"{") + body.count(b"[")
    assert node_bound(body, step) == expected


@settings(max_examples=200, deadline=None)
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(alphabet=",{[]}\"\\ab"),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner, max_size=5),
))  # fmt: skip
def test_node_bound_is_never_below_the_exact_count(value: object) -> None:
    body = orjson.dumps(value)
    assert json_nodes(body) <= node_bound(body)
    assert json_nodes(body) <= node_bound(body, step=3)


def test_node_bound_over_a_mebibyte_and_at_the_cap() -> None:
    """Past one chunk, and a body whose bound is the cap exactly is let through uncounted."""
    item = b'{"role":"user","content":"a, {b} [c]"},'
    body = b"[" + item * 40_000 + b"{}]"
    assert len(body) > 1 << 20
    assert (
        node_bound(body) == 1 + 1 + 40_000 * 6 + 1
    )  # each item: two braces, a bracket, three commas
    at_cap = b"[" + b"1," * 99_998 + b"1]"
    assert node_bound(at_cap) == 100_000 == json_nodes(at_cap)
