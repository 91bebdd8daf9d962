"""Bodies that once reached a 500, or made the proxy check one value and forward another."""

from __future__ import annotations

import orjson
import pytest

from tests.security.conftest import OTHER_KEY, TEAM_KEY, Capture, ProxyFactory, keys_config

USER = {"role": "user", "content": "hi"}


def nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_body(depth: int, **extra: object) -> bytes:
    body = {"model": "gpt-4o", "messages": [USER], "metadata": nested(1), **extra}
    raw = orjson.dumps(body)
    # orjson cannot write this deep, which is the point: build the bytes by hand.
    return raw[:-1] + b', "deep": ' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"


CASES = [
    pytest.param(
        orjson.dumps(
            {
                "model": "gpt-4o",
                "messages": [USER],
                "tools": [{"type": "function", "function": None}],
            }
        ),
        id="tool-function-null",
    ),
    pytest.param(
        orjson.dumps({"model": "gpt-4o", "messages": [USER], "tools": [{"type": "function"}]}),
        id="tool-without-function",
    ),
    pytest.param(
        orjson.dumps({"model": "gpt-4o", "messages": [USER], "functions": [None]}),
        id="functions-null-entry",
    ),
    pytest.param(deep_body(300, contextwarden={"trim": True}), id="nested-300-with-controls"),
    pytest.param(deep_body(300), id="nested-300"),
    pytest.param(
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o-mini"}',
        id="duplicate-model",
    ),
    pytest.param(
        b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "mod\\u0065l": "gpt-4o"}',
        id="duplicate-model-escaped",
    ),
    pytest.param(
        b'{"model": "gpt-4o", "messages": [{"role": "system", "role": "user", "content": "hi"}]}',
        id="duplicate-role",
    ),
    pytest.param(
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "a"}], "messages": []}',
        id="duplicate-messages",
    ),
    pytest.param(
        orjson.dumps(
            {
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": [{"type": "text", "text": 123}]}],
            }
        ),
        id="text-part-not-a-string",
    ),
    pytest.param(
        orjson.dumps(
            {
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": 5}]}],
            }
        ),
        id="image-url-number",
    ),
    pytest.param(
        orjson.dumps(
            {
                "model": "gpt-4o",
                "messages": [
                    USER,
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": {"a": 1}},
                            }
                        ],
                    },
                ],
            }
        ),
        id="arguments-not-a-string",
    ),
]


@pytest.mark.parametrize("body", CASES)
def test_bad_bodies_are_400_in_openais_shape(
    body: bytes, capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture, models={"gpt-4o": {"context_window": 8000}}))
    headers = {"authorization": f"Bearer {OTHER_KEY}", "content-type": "application/json"}
    status, raw = proxy.raw("POST", "/v1/chat/completions", headers, body)
    assert status == 400, raw
    assert set(orjson.loads(raw)["error"]) == {"message", "type", "code", "param"}
    assert capture.seen == []


def test_a_duplicate_model_cannot_slip_past_the_teams_models(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = make_proxy(**keys_config(capture))
    headers = {"authorization": f"Bearer {TEAM_KEY}", "content-type": "application/json"}
    body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o"}'
    status, _ = proxy.raw("POST", "/v1/chat/completions", headers, body)
    assert status == 400
    assert capture.seen == []


def test_quoted_words_inside_content_are_not_duplicates(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    content = 'the JSON {"model": "x", "role": "y"} and a value "model"'
    body = orjson.dumps(
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": content},
                {"role": "assistant", "content": "model"},
                {"role": "user", "content": "é \\u00e9"},
            ],
        }
    )
    proxy = make_proxy(**keys_config(capture))
    headers = {"authorization": f"Bearer {OTHER_KEY}", "content-type": "application/json"}
    status, raw = proxy.raw("POST", "/v1/chat/completions", headers, body)
    assert status == 200, raw
    assert capture.seen[0].body == body  # forwarded as its original bytes
