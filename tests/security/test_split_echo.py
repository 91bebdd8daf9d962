"""R4, window poisoning by a split echo: an overflow's wording and figures planted in two field
names, which the upstream repeats joined in one message, taught the proxy a window of 300.
Figures are now read only from the message's own text (proxy/upstreams/overflows.py)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
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


def comma_joined(seen: Seen) -> Response:
    """A hypothetical upstream that joins the echoed names with a bare comma."""
    fields = [k for k in orjson.loads(seen.body) if k not in KNOWN]
    error = {"message": f"unexpected: {','.join(fields)}", "type": "invalid_request_error"}
    return Response(orjson.dumps({"error": error}), 400, media_type="application/json")


# F8 of #55: U+0130 lowercases to two characters, so 60 of them before the echoes moved every
# mask 60 characters off its echo, and "3" and "00 tokens" joined by a comma read as 300.
DOTTED = ("\u0130" * 60, "maximum context length is 3", "00 tokens")


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
        (comma_joined, DOTTED),
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


def test_dotted_capitals_before_the_echoes_never_make_a_window() -> None:
    """F8: the echoes after 60 U+0130 are masked where they stand, not 60 characters on."""
    sent = orjson.dumps(dict.fromkeys(("model", *DOTTED), 1))
    message = error("unexpected: " + ",".join(DOTTED))
    assert is_context_overflow(400, message, sent) is None


ECHOES = ("maximum context length is 3", "00 tokens", "resulted in 10 tokens")
# Characters whose case changes their length or maps across scripts, often, among any others
# (st.text would merge them into its ranges, where each is as rare as any other character).
AWKWARD = list("\u0130i\u0307\u00df\u1e9e\u03a3\u212aK\ufb03\u0149 ,.0")
UNICODE = st.lists(st.sampled_from(AWKWARD) | st.characters(), max_size=80).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    prefix=UNICODE,
    echo=st.sampled_from(ECHOES),
    after=UNICODE,
)
def test_masks_stay_on_their_echo_after_any_unicode(prefix: str, echo: str, after: str) -> None:
    """Whatever text comes before an echo (and after it), its mask covers exactly the echo:
    the rest of the message is left as it came."""
    from proxy.upstreams.overflows import MASK, own_text

    text = f"{prefix} {echo} {after}"
    for other in (prefix, after):  # the echo once, in the middle, is what is checked
        assume(echo.lower() not in other.lower())
        assume(re.search(re.escape(echo), other, re.IGNORECASE) is None)
    assume(MASK not in text)
    sent = orjson.dumps({"model": "m", echo: 1})
    start = len(prefix) + 1
    expected = text[:start] + MASK * len(echo) + text[start + len(echo) :]
    assert own_text(text, sent) == expected


@pytest.mark.parametrize(
    "code", ["unknown_parameter", "rate_limit_exceeded", "string_above_max_length"]
)
def test_a_code_that_names_another_failure_is_never_an_overflow(code: str) -> None:
    assert is_context_overflow(400, error(REAL, code)) is None
