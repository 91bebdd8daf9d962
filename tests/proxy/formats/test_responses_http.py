"""``POST /v1/responses`` through the proxy, in process, against a respx upstream: bad input gets
OpenAI's error shape, a fitting request goes as its bytes, stateful requests follow the policy,
an upstream that does not serve Responses is named."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.proxy.edge.test_bad_input import assert_openai_error
from tests.proxy.upstreams.test_forwarding import BASE, config_with, running

OK = {"id": "resp_1", "object": "response", "status": "completed", "output": []}
USER = {"role": "user", "content": "hi"}
CALL = {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "file text"}


@pytest.fixture
async def client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    config = config_with(
        monkeypatch,
        limits={"max_body_bytes": 200_000},
        upstreams={
            "demo": {"base_url": BASE, "api_key_env": "DEMO_UPSTREAM_KEY"},
            "chatonly": {"base_url": "http://chatonly.test/v1", "apis": ["chat_completions"]},
        },
        models={
            "small": {"context_window": 600, "tokenizer": "o200k_base"},
            "legacy": {"context_window": 600, "upstream": "chatonly"},
        },
        policies={
            "default": {"summarize": False},
            "auto": {"summarize": False, "stateful": "truncation_auto"},
        },
        teams={"default": {"allowed_policies": ["auto"]}},
    )
    async with running(config) as c:
        yield c


def body(**fields: Any) -> bytes:
    return orjson.dumps({"model": "small", **fields})


CASES = [
    (b"not json", "input"),
    (body(), "input"),
    (body(input=7), "input"),
    (body(input={"role": "user"}), "input"),
    (body(input=[7]), "input[0]"),
    (body(input=[{"type": 5}]), "input[0].type"),
    (body(input=[{"role": 7, "content": "x"}]), "input[0].role"),
    (body(input=[{"role": "user", "content": 5}]), "input[0].content"),
    (body(input=[{"role": "user", "content": [{"text": "no type"}]}]), "input[0].content[0]"),
    (body(input=[USER, {**CALL, "call_id": None}, OUTPUT]), "input[1].call_id"),
    (body(input=[USER, OUTPUT]), "input[1].call_id"),
    (body(input=[USER, CALL]), "input[1]"),
    (body(input=[USER, {"type": "function_call_output", "output": "x"}]), "input[1].call_id"),
    # An output that is no string nor parts: forwarded, it made an upstream answer 500.
    (body(input=[USER, CALL, {**OUTPUT, "output": 5}]), "input[2].output"),
    (body(input=[USER, CALL, {**OUTPUT, "output": None}]), "input[2].output"),
    (body(input=[USER], instructions=["not", "a string"]), "instructions"),
    (body(input=[USER], max_output_tokens=0), "max_output_tokens"),
    (body(input=[USER], max_output_tokens="9"), "max_output_tokens"),
    (body(input=[USER], stream="yes"), "stream"),
    (body(input=[USER], tools={"a": 1}), "tools"),
    (orjson.dumps({"model": 5, "input": "hi"}), "model"),
]


@respx.mock
@pytest.mark.parametrize(("raw", "param"), CASES)
async def test_bad_responses_bodies_get_openai_errors(
    client: httpx.AsyncClient, raw: bytes, param: str
) -> None:
    route = respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=OK))
    error = assert_openai_error(await client.post("/v1/responses", content=raw), 400)
    assert error["type"] == "invalid_request_error"
    if raw != b"not json":
        assert error["param"] == param, error
    assert not route.called


@respx.mock
async def test_a_fitting_request_goes_as_its_bytes_unknown_fields_and_items_included(
    client: httpx.AsyncClient,
) -> None:
    route = respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=OK))
    raw = (
        b'{"model": "small", "input": [{"role": "user", "content": "hi"},'
        b' {"type": "hologram", "x": 1.50}], "future_field": {"a": [1, 2]}, "store": false}'
    )
    response = await client.post("/v1/responses", content=raw)
    assert response.status_code == 200
    assert route.calls.last.request.content == raw
    assert response.headers["x-contextwarden-actions"] == "none"


@respx.mock
async def test_over_the_window_old_turns_go_and_pairs_stay_whole(client: httpx.AsyncClient) -> None:
    route = respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=OK))
    items: list[dict[str, Any]] = []
    for k in range(12):
        items += [
            {"role": "user", "content": f"question {k} " + "word " * 30},
            {"type": "reasoning", "id": f"rs_{k}", "summary": [], "encrypted_content": "e" * 80},
            {"type": "function_call", "call_id": f"c{k}", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{k}", "output": "out " * 20},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ]
    response = await client.post("/v1/responses", json={"model": "small", "input": items})
    assert response.status_code == 200, response.text
    ledger, *sent = orjson.loads(route.calls.last.request.content)["input"]
    # In place of what went, the ledger of it: the conversation's task first.
    assert ledger["role"] == "user"
    assert "Task: question 0" in str(ledger["content"])
    assert len(sent) < len(items)
    kept = items[len(items) - len(sent) :]  # whole turns went, from the oldest
    shape = lambda xs: [(i.get("type"), i.get("role"), i.get("call_id"), i.get("id")) for i in xs]  # noqa: E731
    assert shape(sent) == shape(kept)
    for a, b in zip(sent, kept, strict=True):  # old tool results may be cleared, nothing else
        assert a == b or (a["type"] == "function_call_output" and "cleared" in a["output"])
    assert sent[-5:] == items[-5:]
    assert sent[0]["role"] == "user"
    assert int(response.headers["x-contextwarden-tokens-after"]) <= int(
        response.headers["x-contextwarden-budget"]
    )


@respx.mock
async def test_the_running_turn_that_cannot_fit_is_an_openai_overflow_error(
    client: httpx.AsyncClient,
) -> None:
    route = respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=OK))
    items = [{"role": "user", "content": "word " * 2000}]
    response = await client.post("/v1/responses", json={"model": "small", "input": items})
    error = assert_openai_error(response, 400)
    assert error["code"] == "context_length_exceeded"
    assert error["param"] == "input"
    assert not route.called


@respx.mock
@pytest.mark.parametrize(
    ("policy", "expected"),
    [(None, None), ("auto", "auto")],
)
async def test_stateful_requests_follow_the_policy(
    client: httpx.AsyncClient, policy: str | None, expected: str | None
) -> None:
    route = respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=OK))
    payload: dict[str, Any] = {
        "model": "small",
        "previous_response_id": "resp_0",
        "input": [{"type": "function_call_output", "call_id": "on_server", "output": "x " * 900}],
    }
    if policy:
        payload["contextwarden"] = {"policy": policy}
    response = await client.post("/v1/responses", json=payload)
    assert response.status_code == 200, response.text
    assert "stateful" in response.headers["x-contextwarden-actions"]
    sent = orjson.loads(route.calls.last.request.content)
    assert sent.get("truncation") == expected
    assert sent["input"] == payload["input"]


async def test_a_model_whose_upstream_does_not_serve_responses_is_a_clear_400(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/v1/responses", json={"model": "legacy", "input": "hi"})
    error = assert_openai_error(response, 400)
    assert error["code"] == "unsupported_api"
    assert "chat_completions" in error["message"]


ITEM_FIELDS = st.sampled_from(
    ["type", "role", "content", "call_id", "output", "id", "arguments", "name", "summary"]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=12,
)
TYPES = st.sampled_from(
    ["message", "function_call", "function_call_output", "reasoning", "compaction", "x"]
)


@st.composite
def messy_items(draw: st.DrawFn) -> Any:
    items = []
    for _ in range(draw(st.integers(0, 6))):
        item: dict[str, Any] = {}
        for key in draw(st.lists(ITEM_FIELDS, max_size=5)):
            item[key] = draw(TYPES if key == "type" else JSON)
        items.append(draw(st.just(item) | JSON))
    return draw(st.just(items) | JSON)


@respx.mock
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=messy_items(), window_filler=st.integers(0, 3))
async def test_fuzzed_items_never_get_a_5xx(
    client: httpx.AsyncClient, items: Any, window_filler: int
) -> None:
    respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=OK))
    raw = orjson.dumps(
        {"model": "small", "input": items, "instructions": "x " * 200 * window_filler}
    )
    response = await client.post("/v1/responses", content=raw)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert_openai_error(response, response.status_code)


@respx.mock
async def test_an_output_answering_a_stored_call_travels_with_its_item_reference(
    client: httpx.AsyncClient,
) -> None:
    """With ``store: true`` a client may send an ``item_reference`` to a stored call and then
    its output. The proxy cannot see the call: it neither refuses the output nor parts it from
    the reference when trimming (the pair goes, or stays, whole)."""
    route = respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=OK))
    items: list[dict[str, Any]] = []
    for k in range(12):
        items += [
            {"role": "user", "content": f"step {k}: " + "read the next file " * 6},
            {"type": "item_reference", "id": f"fc_{k}"},
            {"type": "function_call_output", "call_id": f"call_{k}", "output": "line " * 20},
        ]
    items.append({"role": "user", "content": "and now?"})
    short = await client.post("/v1/responses", content=body(input=items[:3], store=True))
    assert short.status_code == 200, short.text
    assert orjson.loads(route.calls[-1].request.content)["input"] == items[:3]
    long = await client.post("/v1/responses", content=body(input=items, store=True))
    assert long.status_code == 200, long.text
    forwarded = orjson.loads(route.calls[-1].request.content)["input"]
    assert len(forwarded) < len(items)  # trimmed
    for i, item in enumerate(forwarded):
        if item.get("type") == "function_call_output":
            assert forwarded[i - 1] == {"type": "item_reference", "id": f"fc_{item['call_id'][5:]}"}
        if item.get("type") == "item_reference":
            assert forwarded[i + 1]["type"] == "function_call_output"
