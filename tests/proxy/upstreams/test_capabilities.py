"""proxy/upstreams/capabilities.py: which answers to a compaction request say the upstream does
not compact, by a table of answers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.upstreams.capabilities import served_in, unsupported

SENT = orjson.dumps(
    {"model": "m", "input": [{"type": "compaction_trigger"}], "metadata": {"note": "x y"}}
)


def error(message: str, code: str | None = None) -> bytes:
    return orjson.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    )


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (404, orjson.dumps({"detail": "Not Found"}), True),
        (405, orjson.dumps({"detail": "Method Not Allowed"}), True),
        (501, b"Not Implemented", True),
        (400, error("Compaction is not supported by this server"), True),
        (400, error("item type compaction_trigger is not supported"), True),
        (400, error("This endpoint is not implemented"), True),
        (404, error("The model 'm' does not exist", "model_not_found"), False),
        (404, error("model m not found"), False),
        (400, error("Unknown parameter: 'bogus'.", "unknown_parameter"), False),
        (
            400,
            error("Invalid value: 'compaction_trigger' is not supported", "invalid_value"),
            False,
        ),
        (400, error("Unsupported parameter: 'reasoning.effort'", "unsupported_parameter"), False),
        (400, error("max_output_tokens must be positive"), False),
        (500, error("compaction is not supported"), False),
        (200, b"{}", False),
    ],
)
def test_only_an_explicit_not_supported_says_it(status: int, body: bytes, says: bool) -> None:
    assert unsupported(status, body, SENT) is says


def test_the_requests_own_words_repeated_are_not_the_upstreams() -> None:
    words = "compaction is not supported"
    sent: dict[str, Any] = {"model": "m", "input": [], "metadata": {"note": words}}
    echoed = error(f"Invalid metadata value: '{words}'")
    assert not unsupported(400, echoed, orjson.dumps(sent))
    assert unsupported(400, echoed, SENT)  # the same words, not sent: the upstream's own


def test_a_key_learned_for_every_caller_by_an_older_version_is_ignored() -> None:
    stored = {"compaction-served\tu": 1, "compaction-served\ta\tu": 1, "a\tm": 8000}
    assert served_in(stored) == [("a", "u")]
