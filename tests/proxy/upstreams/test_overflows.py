from __future__ import annotations

import pytest

from proxy.overflow import Overflow, is_context_overflow

# One real error body per provider wording (SEMANTICS.md), with what must be parsed from it.
CASES = [
    (
        "openai",
        400,
        b'{"error": {"message": "This model\'s maximum context length is 128000 tokens. However, '
        b'your messages resulted in 130512 tokens. Please reduce the length of the messages.", '
        b'"type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}',
        Overflow(128000, 130512, None),
    ),
    (
        "openai with max_tokens",
        400,
        b'{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, you '
        b"requested 9000 tokens (8000 in the messages, 1000 in the completion). Please reduce the "
        b'length of the messages or completion.", "type": "invalid_request_error", "param": '
        b'"messages", "code": "context_length_exceeded"}}',
        Overflow(8192, 8000, 1000),
    ),
    (
        "openai newer",
        400,
        b'{"error": {"message": "Your input exceeds the context window of this model. Please adjust '
        b'your input and try again.", "type": "invalid_request_error", "param": "input", "code": '
        b'"context_length_exceeded"}}',
        Overflow(),
    ),
    (
        "azure",
        400,
        b'{"error": {"message": "This model\'s maximum context length is 4096 tokens. However, your '
        b'messages resulted in 5000 tokens. Please reduce the length of the messages.", "type": '
        b'"invalid_request_error", "param": "messages", "code": "context_length_exceeded", "status": 400}}',
        Overflow(4096, 5000, None),
    ),
    (
        "anthropic",
        400,
        b'{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too '
        b'long: 213462 tokens > 200000 maximum"}}',
        Overflow(200000, 213462, None),
    ),
    (
        "anthropic max_tokens",
        400,
        b'{"type": "error", "error": {"type": "invalid_request_error", "message": "input length and '
        b"`max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or "
        b'`max_tokens` and try again"}}',
        Overflow(200000, 188240, 21333),
    ),
    (
        "vllm",
        400,
        b'{"object": "error", "message": "This model\'s maximum context length is 4096 tokens. '
        b"However, you requested 4596 tokens (4096 in the messages, 500 in the completion). Please "
        b'reduce the length of the messages or completion.", "type": "BadRequestError", "param": '
        b'null, "code": 400}',
        Overflow(4096, 4096, 500),
    ),
    (
        "sglang in a 200 stream",
        200,
        b'data: {"error": {"message": "The input (5000 tokens) is longer than the model\'s context '
        b'length (4096 tokens).", "type": "BadRequestError", "code": 400}}\n\n',
        Overflow(4096, 5000, None),
    ),
    (
        "gemini",
        400,
        b'{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum '
        b'number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}',
        Overflow(1048576, 1200000, None),
    ),
    (
        "mistral",
        400,
        b'{"object": "error", "message": "Prompt contains 40000 tokens and 0 draft tokens, too large '
        b'for model with 32768 maximum context length", "type": "invalid_request_error", "code": null}',
        Overflow(32768, 40000, None),
    ),
    (
        "groq",
        400,
        b'{"error": {"message": "Please reduce the length of the messages or completion.", "type": '
        b'"invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}',
        Overflow(),
    ),
    (
        "bedrock",
        400,
        b'{"message": "Input is too long for requested model."}',
        Overflow(),
    ),
    (
        "bedrock too many",
        400,
        b'{"message": "The model returned the following errors: too many input tokens"}',
        Overflow(),
    ),
    (
        "bedrock numbers",
        400,
        b'{"message": "prompt tokens (250000) exceed model maximum (200000)"}',
        Overflow(200000, 250000, None),
    ),
    (
        "openrouter",
        400,
        b'{"error": {"message": "This endpoint\'s maximum context length is 163840 tokens. However, '
        b"you requested about 170000 tokens (160000 of text input, 10000 in the output). Please "
        b'reduce the length of either one.", "code": 400}}',
        Overflow(163840, 170000, None),
    ),
    (
        "llama.cpp",
        400,
        b'{"error": {"code": 400, "message": "the request exceeds the available context size, try '
        b'increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}',
        Overflow(4096, 5000, None),
    ),
    (
        "llama.cpp as llama-server words it",
        400,
        b'{"error": {"code": 400, "message": "request (9412 tokens) exceeds the available context '
        b'size (8192 tokens), try increasing it", "type": "exceed_context_size_error", '
        b'"n_prompt_tokens": 9412, "n_ctx": 8192}}',
        Overflow(8192, 9412, None),
    ),
    (
        "llama.cpp as HTTP 500, with its fields",
        500,
        b'{"error": {"code": 500, "message": "request (9412 tokens) exceeds the available context '
        b'size (8192 tokens), try increasing it", "type": "exceed_context_size_error", '
        b'"n_prompt_tokens": 9412, "n_ctx": 8192}}',
        Overflow(8192, 9412, None),
    ),
    (
        "llama.cpp as HTTP 500, a server_error with the message alone",
        500,
        b'{"error": {"code": 500, "message": "request (9412 tokens) exceeds the available context '
        b'size (8192 tokens), try increasing it", "type": "server_error"}}',
        Overflow(8192, 9412, None),
    ),
    (
        "lm studio, its error a string",
        400,
        b'{"error": "Trying to keep the first 10048 tokens when context the overflows. However, '
        b"the model is loaded with context length of only 8192 tokens, which is not enough. Try "
        b'to load the model with a larger context length, or provide a shorter input"}',
        Overflow(8192, 10048, None),
    ),
    (
        "lm studio, as an error object",
        400,
        b'{"error": {"message": "Trying to keep the first 10048 tokens when context the '
        b"overflows. However, the model is loaded with context length of only 8192 tokens, "
        b'which is not enough."}}',
        Overflow(8192, 10048, None),
    ),
    (
        "llama.cpp embeddings",
        400,
        b'{"error": {"code": 400, "message": "input (600 tokens) is larger than the max context '
        b'size (512 tokens). skipping", "type": "exceed_context_size_error", "n_prompt_tokens": '
        b'600, "n_ctx": 512}}',
        Overflow(512, 600, None),
    ),
    (
        "vllm since 0.10",
        400,
        b'{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, you '
        b"requested 1000 output tokens and your prompt contains at least 7800 input tokens, for a "
        b"total of at least 8800 tokens. Please reduce the length of the input prompt or the "
        b'number of requested output tokens. (parameter=input_tokens, value=7800)", "type": '
        b'"BadRequestError", "param": "input_tokens", "code": 400}}',
        Overflow(8192, 7800, 1000),
    ),
    (
        "cerebras",
        400,
        b'{"message": "Please reduce the length of the messages or completion. Current length is '
        b'9000 while limit is 8192", "type": "invalid_request_error", "code": "context_length_exceeded"}',
        Overflow(8192, 9000, None),
    ),
]


@pytest.mark.parametrize(
    ("provider", "status", "body", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_provider_wordings_are_overflows(
    provider: str, status: int, body: bytes, expected: Overflow
) -> None:
    assert is_context_overflow(status, body) == expected


NEGATIVES = [
    (
        "string_above_max_length",
        400,
        b'{"error": {"message": "Invalid \'messages[0].content\': string too long. Expected a string '
        b'with maximum length 10485760, but got a string with length 12000000 instead.", "type": '
        b'"invalid_request_error", "param": "messages[0].content", "code": "string_above_max_length"}}',
    ),
    (
        "rate limit",
        429,
        b'{"error": {"message": "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, '
        b'Requested 50000.", "type": "tokens", "code": "rate_limit_exceeded"}}',
    ),
    (
        "max_tokens too large",
        400,
        b'{"error": {"message": "max_tokens is too large: 100000. This model supports at most 16384 '
        b'completion tokens, whereas you provided 100000.", "type": "invalid_request_error", '
        b'"param": "max_tokens", "code": "invalid_value"}}',
    ),
    ("auth", 401, b'{"error": {"message": "context_length_exceeded", "code": "invalid_api_key"}}'),
    (
        "server error",
        500,
        b'{"error": {"message": "The server had an error", "type": "server_error"}}',
    ),
    (
        "successful completion",
        200,
        b'{"choices": [{"message": {"content": "reduce the length of the messages"}}]}',
    ),
    ("not json", 400, b"<html>Bad Request</html>"),
    ("empty", 400, b""),
]


@pytest.mark.parametrize(("name", "status", "body"), NEGATIVES, ids=[n[0] for n in NEGATIVES])
def test_other_errors_are_not_overflows(name: str, status: int, body: bytes) -> None:
    assert is_context_overflow(status, body) is None
