"""The Responses API's WebSocket mode on a real proxy in front of the demo upstream, driven by
the ``websockets`` client: each ``response.create`` frame is fitted and forwarded by HTTPS as
the same request posted would be (tests/clients/test_use_it_with.py runs the real Codex)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.responses import ResponsesCounter
from proxy.demo.servers import BackgroundServer
from tests.e2e.conftest import LITELLM_MODEL, MODEL, StackFactory
from tests.e2e.test_responses import history


async def exchange(url: str, frames: list[Any]) -> list[list[dict[str, Any]]]:
    """Each frame sent in turn on one connection, and the frames that answered it (up to a
    completed or failed response, or an error); a frame that is a function of the answers so
    far is called with them."""
    answers: list[list[dict[str, Any]]] = []
    async with websockets.connect(url, additional_headers={"Authorization": "Bearer sk-t"}) as ws:
        for frame in frames:
            sent = frame(answers) if callable(frame) else frame
            await ws.send(sent if isinstance(sent, str) else orjson.dumps(sent).decode())
            if isinstance(sent, dict) and sent["type"] == "response.processed":
                continue  # an acknowledgement: nothing answers it
            got: list[dict[str, Any]] = []
            while True:
                event = orjson.loads(await ws.recv())
                got.append(event)
                if event["type"] in ("response.completed", "response.failed", "error"):
                    break
            answers.append(got)
    return answers


def ws_url(proxy_url: str) -> str:
    return proxy_url.replace("http://", "ws://") + "/v1/responses"


def create(items: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"type": "response.create", "model": MODEL, "input": items, "store": False, **more}


def test_warm_up_then_requests_rebuilt_on_the_connection(make_stack: StackFactory) -> None:
    stack = make_stack(window=4096)
    first = [{"role": "user", "content": "hello"}]
    new = [{"role": "user", "content": "and then?"}]

    def follow_up(answers: list[list[dict[str, Any]]]) -> dict[str, Any]:
        done = answers[-1][-1]["response"]
        return create(new, previous_response_id=done["id"])

    def after_warm_up(answers: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return create(first, previous_response_id=answers[0][-1]["response"]["id"])

    answers = asyncio.run(
        exchange(
            ws_url(stack.proxy_url),
            [
                create([], generate=False),
                after_warm_up,
                {"type": "response.processed"},
                follow_up,
            ],
        )
    )
    warm, one, two = answers
    assert [e["type"] for e in warm] == ["response.created", "response.completed"]
    assert warm[-1]["response"]["output"] == []
    assert one[-1]["type"] == two[-1]["type"] == "response.completed"
    assert len(stack.received) == 2  # the warm-up reached no upstream
    output = [e["item"] for e in one if e["type"] == "response.output_item.done"]
    # The follow-up went upstream whole: the first input, its output, the new items.
    assert stack.received[0]["input"] == first
    assert stack.received[1]["input"] == [*first, *output, *new]
    assert "previous_response_id" not in stack.received[1]
    assert all(r["stream"] is True and "generate" not in r for r in stack.received)


def test_a_stale_id_and_bad_frames_are_error_frames_and_the_connection_stays(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(window=4096)
    answers = asyncio.run(
        exchange(
            ws_url(stack.proxy_url),
            [
                create([{"role": "user", "content": "x"}], previous_response_id="resp_gone"),
                "not json",
                {"type": "session.update"},
                {"type": "response.create", "input": [{"role": "user", "content": "no model"}]},
                create([{"role": "user", "content": "hello"}]),
            ],
        )
    )
    stale, garbled, unknown, invalid, fine = (a[-1] for a in answers)
    assert stale["type"] == "error" and stale["status"] == 400
    assert stale["error"]["code"] == "previous_response_not_found"
    assert stale["error"]["param"] == "previous_response_id"
    assert garbled["error"]["code"] == "invalid_json"
    assert unknown["error"]["code"] == "invalid_event"
    assert invalid["type"] == "error" and invalid["status"] == 400
    assert fine["type"] == "response.completed"
    assert len(stack.received) == 1


def test_an_over_window_frame_is_fitted_like_a_post(make_stack: StackFactory) -> None:
    stack = make_stack(window=1024)
    items = history(12)
    assert ResponsesCounter("o200k_base").prompt({"input": items}) > 1024
    answers = asyncio.run(exchange(ws_url(stack.proxy_url), [create(items, max_output_tokens=64)]))
    assert answers[0][-1]["type"] == "response.completed"
    sent = stack.received[-1]
    assert ResponsesCounter("o200k_base").prompt(sent) + 64 <= 1024
    assert sent["input"][-1] == items[-1] and len(sent["input"]) < len(items)


@pytest.mark.parametrize("as_event", [False, True])
def test_an_upstream_overflow_is_retried_like_a_post(
    make_stack: StackFactory, as_event: bool
) -> None:
    """The proxy believes the window is 4096, the upstream's is 1024: its refusal (a 400, or a
    ``response.failed`` event in a 200 stream) is shrunk and retried, unseen by the client."""
    stack = make_stack(window=1024, proxy_window=4096)
    stack.upstream_app.state.responses_overflow_event = as_event
    items = history(12)
    answers = asyncio.run(exchange(ws_url(stack.proxy_url), [create(items, max_output_tokens=64)]))
    kinds = [e["type"] for e in answers[0]]
    assert kinds[-1] == "response.completed" and "response.failed" not in kinds
    assert len(stack.received) >= 2
    assert ResponsesCounter("o200k_base").prompt(stack.received[-1]) + 64 <= 1024


def test_a_refused_request_is_an_error_frame_with_its_status(make_stack: StackFactory) -> None:
    """A call without its output: refused (400) as a post would be, in an error frame."""
    stack = make_stack(window=4096)
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    answers = asyncio.run(
        exchange(ws_url(stack.proxy_url), [create([{"role": "user", "content": "x"}, call])])
    )
    refused = answers[0][-1]
    assert refused["type"] == "error" and refused["status"] == 400
    assert refused["error"]["type"] == "invalid_request_error"
    assert "has no output" in refused["error"]["message"]


async def handshake(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    try:
        async with websockets.connect(url, additional_headers=headers):
            return 101, b""
    except InvalidStatus as exc:
        return exc.response.status_code, bytes(exc.response.body or b"")


def test_the_handshake_meets_the_origin_and_path_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy that spends its own key: a browser page's handshake (its Origin) is refused
    before the upgrade, as its POST would be; so is a path that is not normalised."""
    monkeypatch.setenv("WS_TEST_KEY", "sk-own")
    config = {
        "upstreams": {"o": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "WS_TEST_KEY"}},
        "default_upstream": "o",
        "data_dir": str(tmp_path),
    }
    with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
        base = proxy.url.replace("http://", "ws://")
        browser = asyncio.run(handshake(f"{base}/v1/responses", {"Origin": "https://evil.test"}))
        plain = asyncio.run(handshake(f"{base}/v1/responses", {}))
        climbing = asyncio.run(handshake(f"{base}/v1//responses", {}))
        chat = asyncio.run(handshake(f"{base}/v1/chat/completions", {}))
        messages = asyncio.run(handshake(f"{base}/v1/messages", {}))
    assert browser[0] == 403 and orjson.loads(browser[1])["error"]["code"] == "untrusted_caller"
    assert plain[0] == 101
    assert climbing[0] == 400 and orjson.loads(climbing[1])["error"]["code"] == "invalid_path"
    # Only the Responses API has a WebSocket mode: elsewhere a 404 in the client's shape (it
    # was a 403 with no body).
    assert chat[0] == 404 and "Invalid URL" in orjson.loads(chat[1])["error"]["message"]
    assert messages[0] == 404


def test_what_the_upstream_cannot_serve_is_an_error_frame(make_stack: StackFactory) -> None:
    """The proxy serves the WebSocket and speaks HTTPS upstream: a model whose upstream does
    not serve the Responses API is refused as its POST would be (``unsupported_api``), in an
    error frame, and the connection goes on to serve the next frame."""
    stack = make_stack(window=4096)
    hello = [{"role": "user", "content": "hello"}]
    frames = [create(hello, model=LITELLM_MODEL), create(hello)]
    refused, fine = asyncio.run(exchange(ws_url(stack.proxy_url), frames))
    assert refused[-1]["type"] == "error" and refused[-1]["status"] == 400
    assert refused[-1]["error"]["code"] == "unsupported_api"
    assert fine[-1]["type"] == "response.completed"
    assert len(stack.received) == 1


def test_a_stored_response_named_is_left_for_the_upstream(make_stack: StackFactory) -> None:
    """An id the connection does not hold, of a stored response: forwarded as the POST's
    would be, untouched, with the items the frame sent."""
    stack = make_stack(window=4096)
    new = [{"role": "user", "content": "and then?"}]
    frames = [create(new, store=True, previous_response_id="resp_stored", metadata={"k": "v"})]
    (answer,) = asyncio.run(exchange(ws_url(stack.proxy_url), frames))
    assert answer[-1]["type"] == "response.completed"
    sent = stack.received[-1]
    assert sent["previous_response_id"] == "resp_stored" and sent["input"] == new
    assert sent["metadata"] == {"k": "v"}


def test_frames_over_the_body_limits_are_413_error_frames(make_stack: StackFactory) -> None:
    """A frame is a request body: over ``limits.max_body_bytes``, or holding more JSON values
    than ``limits.max_json_nodes``, it is refused before it is parsed, as a POST is."""
    stack = make_stack(window=4096, limits={"max_body_bytes": 20_000, "max_json_nodes": 1_000})
    big = [{"role": "user", "content": "x" * 30_000}]
    many = [{"role": "user", "content": [{"type": "input_text", "text": "y"}] * 600}]
    hello = [{"role": "user", "content": "hello"}]
    frames = [create(big), create(many), create(hello)]
    over, nodes, fine = asyncio.run(exchange(ws_url(stack.proxy_url), frames))
    assert over[-1]["type"] == "error" and over[-1]["status"] == 413
    assert "20000-byte limit" in over[-1]["error"]["message"]
    assert nodes[-1]["type"] == "error" and nodes[-1]["status"] == 413
    assert "JSON values" in nodes[-1]["error"]["message"]
    assert fine[-1]["type"] == "response.completed" and len(stack.received) == 1


def test_an_unreachable_upstream_is_an_error_frame(tmp_path: Path) -> None:
    config = {
        "upstreams": {"openai": {"base_url": "http://127.0.0.1:9/v1"}},
        "default_upstream": "openai",
        "models": {MODEL: {"context_window": 4096}},
        "data_dir": str(tmp_path),
    }
    hello = [{"role": "user", "content": "hello"}]
    with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
        answers = asyncio.run(exchange(ws_url(proxy.url), [create(hello), create(hello)]))
    for answer in answers:
        assert [e["type"] for e in answer] == ["error"]
        assert answer[0]["status"] == 502


def test_the_handshake_needs_a_team_key_in_keys_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keys mode: a handshake without a key, or with one no team holds, is refused (401 in
    OpenAI's shape) before the upgrade; a team's key is let in."""
    monkeypatch.setenv("WS_TEAM_KEY", "cw-team-key")
    config = {
        "auth": "keys",
        "teams": {"t": {"key_envs": ["WS_TEAM_KEY"]}},
        "upstreams": {"o": {"base_url": "http://127.0.0.1:9/v1"}},
        "default_upstream": "o",
        "data_dir": str(tmp_path),
    }
    with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
        url = ws_url(proxy.url)
        none = asyncio.run(handshake(url, {}))
        wrong = asyncio.run(handshake(url, {"Authorization": "Bearer cw-other"}))
        team = asyncio.run(handshake(url, {"Authorization": "Bearer cw-team-key"}))
    for status, body in (none, wrong):
        assert status == 401 and orjson.loads(body)["error"]["type"] == "authentication_error"
    assert team[0] == 101
