"""An id spelled otherwise than the upstream reads it skipped the ownership check (#55, F10):
``" msg_secret0001"`` was looked up as itself, had no owner, and went upstream, which may read
it as ``msg_secret0001``. Ids are now taken only in the exact form ids take (a 400
``invalid_id`` otherwise), and an ``item_reference`` whose ``type`` is left out, as the API
allows, is checked like any other."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import OTHER_KEY, TEAM_KEY, Capture, ProxyFactory, keys_config
from tests.security.test_stored_objects import response_with_items

SPELLED = [
    ("/v1/responses", {"input": [{"type": "item_reference", "id": " msg_secret0001"}, {"role": "user", "content": "go"}]}, "input[0].id"),
    ("/v1/responses", {"input": [{"type": "item_reference", "id": "msg_secret0001\u00a0"}, {"role": "user", "content": "go"}]}, "input[0].id"),
    ("/v1/responses", {"input": "go", "previous_response_id": "resp_abc123 "}, "previous_response_id"),
    ("/v1/responses", {"input": "go", "previous_response_id": "\u200bresp_abc123"}, "previous_response_id"),
    ("/v1/responses", {"input": "go", "conversation": {"id": " resp_abc123"}}, "conversation.id"),
    ("/v1/responses/input_tokens", {"input": [{"type": "item_reference", "id": "\tmsg_secret0001"}]}, "input[0].id"),
    ("/v1/responses/input_tokens", {"previous_response_id": ["resp_abc123"]}, "previous_response_id"),
]  # fmt: skip


@pytest.fixture
def proxy(capture: Capture, make_proxy: ProxyFactory) -> Any:
    """Team ``limited`` holds resp_abc123 and its items; ``other`` is the thief."""
    capture.answer = response_with_items
    config = keys_config(capture, forward_paths=["responses", "responses/*"])
    proxy = make_proxy(**config)
    with proxy.client(TEAM_KEY) as c:
        assert c.post("/v1/responses", json={"model": "gpt-4o", "input": "hi"}).status_code == 200
    capture.seen.clear()
    return proxy


@pytest.mark.parametrize(("path", "body", "param"), SPELLED)
def test_an_id_spelled_otherwise_is_refused_not_passed_unchecked(
    path: str, body: dict[str, Any], param: str, proxy: Any, capture: Capture
) -> None:
    with proxy.client(OTHER_KEY) as c:
        answer = c.post(path, json={"model": "gpt-4o", **body})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_id"
    assert answer.json()["error"]["param"] == param
    assert capture.seen == []


def test_an_item_reference_without_its_type_is_checked(proxy: Any, capture: Capture) -> None:
    body = {"model": "gpt-4o", "input": [{"id": "msg_secret0001"}, {"type": None, "id": "rs_secret0001"}]}  # fmt: skip
    with proxy.client(OTHER_KEY) as c:
        stolen = c.post("/v1/responses/input_tokens", json=body)
    assert stolen.status_code == 403, stolen.text
    assert stolen.json()["error"]["code"] == "not_your_object"
    with proxy.client(TEAM_KEY) as c:
        assert c.post("/v1/responses/input_tokens", json=body).status_code == 200
    assert len(capture.seen) == 1


def test_a_path_segment_holding_an_id_beside_white_space_is_refused(
    proxy: Any, capture: Capture
) -> None:
    for path in ("/v1/responses/%20resp_abc123", "/v1/responses/resp_abc123%C2%A0/input_items"):
        status, body = proxy.raw("GET", path, {"authorization": f"Bearer {OTHER_KEY}"})
        assert status == 400, body
        assert b"invalid_id" in body
    assert capture.seen == []
