"""R4, window poisoning by a split echo: an overflow's wording and figures planted in two field
names, which the upstream repeats joined in one message, taught the proxy a window of 300.
Figures are now read only from the message's own text (proxy/upstreams/overflows.py)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.responses import Response

from proxy.upstreams.overflows import is_context_overflow
from tests.security.conftest import OTHER_KEY, Capture, ProxyFactory, Seen, chat_body, keys_config
from tests.security.test_echoed_errors import windows

KNOWN = ("model", "messages", "max_tokens")
HALVES = ("maximum context length is 300 tokens. However, your messages", "resulted in 10 tokens")


def openai_unknown_fields(seen: Seen) -> Response:
    """OpenAI's 400 for unknown fields: every name, joined by ", "."""
    fields = [k for k in orjson.loads(seen.body) if k not in KNOWN]
    message = f"Unrecognized request arguments supplied: {', '.join(fields)}"
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return Response(orjson.dumps({"error": error}), 400, media_type="application/json")


def validator_echo(seen: Seen) -> Response:
    """A FastAPI-style 422 (vLLM, llama.cpp's OpenAI servers) that quotes each bad value."""
    fields = [k for k in orjson.loads(seen.body) if k not in KNOWN]
    detail = [
        {"loc": ["body", f], "msg": "Extra inputs are not permitted", "input": f} for f in fields
    ]
    return Response(orjson.dumps({"detail": detail}), 400, media_type="application/json")


def space_joined(seen: Seen) -> Response:
    """A hypothetical upstream that joins the echoed names with a space."""
    fields = [k for k in orjson.loads(seen.body) if k not in KNOWN]
    error = {"message": f"unexpected: {' '.join(fields)}", "type": "invalid_request_error"}
    return Response(orjson.dumps({"error": error}), 400, media_type="application/json")


def planted(*names: str) -> bytes:
    raw = orjson.dumps(chat_body(max_tokens=100))[:-1]
    return raw + b"".join(b',"%s":1' % n.encode() for n in names) + b"}"


@pytest.mark.parametrize(
    ("upstream", "names"),
    [
        (openai_unknown_fields, HALVES),
        (validator_echo, HALVES),
        (space_joined, ("maximum context length is", "300 tokens")),
        (space_joined, ("This model's maximum context length is 300", "tokens. Reduce it")),
    ],
)
def test_a_window_split_over_echoed_fields_is_never_learned(
    upstream: Any, names: tuple[str, ...], capture: Capture, make_proxy: ProxyFactory
) -> None:
    capture.answer = upstream
    proxy = make_proxy(**keys_config(capture))
    headers = {"content-type": "application/json"}
    with proxy.client(OTHER_KEY) as c:
        for _ in range(3):
            answer = c.post("/v1/chat/completions", content=planted(*names), headers=headers)
            assert answer.status_code == 400
        capture.answer = None
        normal = c.post("/v1/chat/completions", json=chat_body())
    assert normal.status_code == 200
    learned = windows(proxy.url)
    assert learned["learned_windows"] == {}, learned
    assert normal.headers["x-contextwarden-budget"] not in ("0", "unknown")
    assert int(normal.headers["x-contextwarden-budget"]) > 300


def error(message: str, code: str | None = None) -> bytes:
    return orjson.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    )


REAL = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9000 tokens. Please reduce the length of the messages."
)


def test_a_real_overflow_is_read_whatever_the_conversation_talks_about() -> None:
    """The conversation and the tools use the overflow's words one by one: masking leaves a
    single word alone, so the upstream's own message still reads whole."""
    sent = orjson.dumps(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "What is a maximum context length? 8192 tokens?"},
                {"role": "assistant", "content": "However, your messages resulted in 10 tokens"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "properties": {"context": {}, "length": {}, "maximum": {}, "tokens": {}}}}}],
        }
    )  # fmt: skip
    found = is_context_overflow(400, error(REAL, "context_length_exceeded"), sent)
    assert found is not None and (found.limit, found.prompt) == (8192, 9000)
    found = is_context_overflow(400, error(REAL), sent)  # vLLM's: no code, the same words
    assert found is not None and found.limit == 8192


def test_own_text_masks_whole_echoes_only() -> None:
    from proxy.upstreams.overflows import MASK, own_text

    sent = orjson.dumps({"a": 1, "maximum context length is 300": 1, "x": "3", "word": "context"})
    text = own_text("unknown: maximum context length is 300, context; 3000 tokens", sent)
    echoed = "maximum context length is 300"
    assert text == "unknown: " + MASK * len(echoed) + ", context; 3000 tokens"


@pytest.mark.parametrize(
    "code", ["unknown_parameter", "rate_limit_exceeded", "string_above_max_length"]
)
def test_a_code_that_names_another_failure_is_never_an_overflow(code: str) -> None:
    assert is_context_overflow(400, error(REAL, code)) is None
