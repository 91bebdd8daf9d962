from __future__ import annotations

import base64
import struct
import zlib

import pytest

from proxy.windows.tokenizers import Tokenizers
from strategies import bounded_memory, tokens
from strategies.images import ImageCosts, image_tokens, tiles
from strategies.tokens import WORD, ChatCounter, count_prompt
from tests.conftest import CL100K, O200K
from tests.counters import CharCounter, FixedCounter

# The OpenAI cookbook's example conversation ("How to count tokens with tiktoken"), whose counts
# the cookbook checked against the API's reported prompt_tokens: 129 for gpt-4-0613 and
# gpt-3.5-turbo, 124 for gpt-4o and gpt-4o-mini.
COOKBOOK = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities "
        "for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]


def o200k() -> ChatCounter:
    return ChatCounter(lambda t: len(O200K.encode_ordinary(t)))


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-4o", 124), ("gpt-4o-mini", 124), ("gpt-4-0613", 129), ("gpt-3.5-turbo", 129)],
)
def test_cookbook_counts_match_the_api(model: str, expected: int) -> None:
    counter = Tokenizers(1.2).for_model(model).counter
    assert count_prompt(counter, COOKBOOK) == expected


def test_cjk_and_emoji_are_counted_by_the_tokenizer() -> None:
    text = "你好，世界！これは日本語のテキストです。🙂🚀"
    message = {"role": "user", "content": text}
    expected = 3 + len(O200K.encode("user")) + len(O200K.encode(text)) + 3
    assert count_prompt(o200k(), [message]) == expected


def test_special_token_text_is_ordinary_text() -> None:
    message = {"role": "user", "content": "<|endoftext|>"}
    assert o200k().message(message) == 3 + 1 + len(O200K.encode_ordinary("<|endoftext|>"))


def test_text_parts_count_like_string_content() -> None:
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}],
    }
    counter = o200k()
    assert counter.message(parts) == 3 + 1 + len(O200K.encode("hello")) + len(
        O200K.encode(" world")
    )


def _png(width: int, height: int) -> str:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = (
        struct.pack(">I", len(ihdr))
        + b"IHDR"
        + ihdr
        + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    )
    data = b"\x89PNG\r\n\x1a\n" + chunk
    return "data:image/png;base64," + base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("width", "height", "detail", "expected"),
    [
        (1024, 1024, "high", 765),  # OpenAI's worked example: 4 tiles
        (2048, 4096, "high", 1105),  # OpenAI's worked example: 6 tiles
        (4096, 8192, "low", 85),
        (512, 512, "auto", 255),
    ],
)
def test_image_parts_follow_openai_vision_pricing(
    width: int, height: int, detail: str, expected: int
) -> None:
    assert image_tokens(_png(width, height), detail, ImageCosts()) == expected


def test_remote_image_is_charged_the_worst_case() -> None:
    assert image_tokens("https://example.com/cat.png", "high", ImageCosts()) == 85 + 8 * 170
    assert max(tiles(w, h) for w in range(64, 4096, 97) for h in range(64, 4096, 89)) <= 8


def test_image_message_counts_text_and_image() -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": _png(1024, 1024), "detail": "high"}},
    ]
    message = {"role": "user", "content": content}
    assert o200k().message(message) == 3 + 1 + len(O200K.encode("What is this?")) + 765


def test_gpt_4o_mini_images_cost_more() -> None:
    counter = Tokenizers(1.2).for_model("gpt-4o-mini").counter
    content = [{"type": "image_url", "image_url": {"url": _png(512, 512), "detail": "low"}}]
    assert counter.message({"role": "user", "content": content}) == 3 + 1 + 2833


def test_tool_calls_and_results_are_counted_generously() -> None:
    counter = o200k()
    args = '{"city": "Paris", "unit": "celsius"}'
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": args},
            }
        ],
    }
    floor = (
        3
        + len(O200K.encode("assistant"))
        + len(O200K.encode("get_weather"))
        + len(O200K.encode(args))
    )
    assert counter.message(call) >= floor + 10
    result = {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"}
    expected = (
        3
        + len(O200K.encode("tool"))
        + len(O200K.encode("call_1"))
        + len(O200K.encode("18C, cloudy"))
    )
    assert counter.message(result) == expected


def test_tool_definitions_follow_the_cookbook_heuristic() -> None:
    counter = o200k()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "description": "Get the current weather in a given location",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "location": {"type": "string", "description": "The city and state"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    },
                },
            },
        }
    ]
    n = lambda s: len(O200K.encode(s))  # noqa: E731
    expected = (
        7
        + n("get_current_weather:Get the current weather in a given location")
        + 3
        + 3
        + n("location:string:The city and state")
        + 3
        + (-3 + 3 + n("celsius") + 3 + n("fahrenheit"))
        + n("unit:string:")
        + 12
    )
    assert counter.tools(tools, None) == expected
    assert counter.tools(None, None) == 0


def test_cache_returns_the_same_count_for_an_equal_message() -> None:
    calls = []

    def length(text: str) -> int:
        calls.append(text)
        return len(CL100K.encode_ordinary(text))

    counter = ChatCounter(length)
    first = counter.message({"role": "user", "content": "hi there"})
    n_calls = len(calls)
    assert counter.message({"role": "user", "content": "hi there"}) == first
    assert len(calls) == n_calls


def test_a_short_value_is_tokenized_once_and_counted_the_same() -> None:
    """Roles, tool names and call ids recur in every new message: counted once per counter,
    with the tokenizer's own count; a longer text is always tokenized."""
    calls = []

    def length(text: str) -> int:
        calls.append(text)
        return len(CL100K.encode_ordinary(text))

    counter = ChatCounter(length)
    for text in ("tool", "assistant", "call_abc123", "", "x" * WORD):
        assert counter.text(text) == counter.text(text) == length(text)
    assert calls.count("tool") == 2 and calls.count("x" * WORD) == 2  # once, and the check
    long = "word " * WORD
    assert counter.text(long) == counter.text(long) == length(long)
    assert calls.count(long) == 3
    message = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
    assert counter.message(message) == ChatCounter(length).message(dict(message))


def test_a_counters_memory_is_bounded_and_forgets_the_least_recently_used_first() -> None:
    """Short texts and message counts hold at most the counter's memory; what went is
    tokenized again, with the same count."""
    calls = []

    def length(text: str) -> int:
        calls.append(text)
        return len(CL100K.encode_ordinary(text))

    entry = bounded_memory.KEY_ENTRY + WORD
    counter = ChatCounter(length, memory=8 * tokens.WORDS_SHARE * entry)  # 4 texts a generation
    texts = [f"{k} " + "y" * (WORD - 2) for k in range(8)]
    counts = [counter.text(t) for t in texts[:5]]  # the fifth begins a new generation
    assert counter.text(texts[0]) == counts[0]  # used again: it moves along
    for t in texts[5:]:  # a third generation begins: what was not used since goes
        counter.text(t)
    assert len(calls) == len(texts)
    assert counter.held <= counter.limit
    assert counter.text(texts[0]) == counts[0] and calls[-1] == texts[-1]  # still held
    assert counter.text(texts[2]) == counts[2] and calls[-1] == texts[2]  # gone: counted again


def test_estimate_counter_errs_on_the_side_of_more() -> None:
    estimate = Tokenizers(1.2).for_model("claude-sonnet-4-5")
    exact = Tokenizers(1.2).for_model("gpt-4")
    assert not estimate.exact and exact.exact
    message = {"role": "user", "content": "A fairly ordinary English sentence about budgets."}
    assert estimate.counter.message(message) > exact.counter.message(message)


def test_fixed_and_char_counters() -> None:
    assert FixedCounter(50).message({"role": "user", "content": "x" * 999}) == 50
    char = CharCounter(chars_per_token=4)
    assert char.message({"role": "user", "content": "abcdefgh", "name": "ab"}) == 3
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    assert char.message(image) == 85


@pytest.mark.parametrize("chars", [0, -5, float("nan")])
def test_char_counter_refuses_a_rate_that_is_not_positive(chars: float) -> None:
    with pytest.raises(ValueError):
        CharCounter(chars_per_token=chars)
