from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from strategies.engine import FitRequest, fit
from strategies.lossless import REPEATED, Lossless, collapse_runs, compact_json
from strategies.microcompact import CLEARED
from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(), inner, max_size=6),
    max_leaves=30,
)


@given(json_values, st.sampled_from([None, 1, 2, 4, "\t"]), st.booleans())
def test_compacted_json_parses_back_to_the_same_value(
    value: Any, indent: int | str | None, ascii_only: bool
) -> None:
    text = json.dumps({"data": value}, indent=indent, ensure_ascii=ascii_only)
    out = compact_json(text)
    assert json.loads(out) == json.loads(text)
    assert len(out) <= len(text)
    assert compact_json(out) == out


def test_numbers_and_key_order_are_kept_as_spelled() -> None:
    text = '{\n  "z": 1.50,\n  "a": 1e5,\n  "s": "two  spaces\\n and \\" a quote"\n}'
    assert compact_json(text) == '{"z":1.50,"a":1e5,"s":"two  spaces\\n and \\" a quote"}'


def test_json_after_a_header_and_json_lines() -> None:
    header = "HTTP/1.1 200 OK\ncontent-type: application/json\n"
    body = json.dumps({"items": [1, 2, 3]}, indent=2)
    assert compact_json(header + body) == header + '{"items":[1,2,3]}'
    lines = '{"a": 1}\n{"b": [1, 2]}\n'
    assert compact_json(lines) == '{"a":1}\n{"b":[1,2]}\n'


def test_what_is_not_json_or_is_ambiguous_is_left_alone() -> None:
    for text in ('{"a": 1, "a": 2}', "{not json}", "plain text\nwith lines", "[1, 2,]"):
        assert compact_json(text) == text


def expand(text: str) -> str:
    """The inverse of ``collapse_runs``, for the test."""
    out: list[str] = []
    pattern = re.compile(re.escape(REPEATED).replace(r"\{n\}", r"(\d+)") + "$")
    for line in text.split("\n"):
        found = pattern.match(line)
        out += [out[-1]] * int(found.group(1)) if found else [line]
    return "\n".join(out)


@given(
    st.lists(
        st.tuples(st.sampled_from(["", "a", "warning: x is deprecated", "ok"]), st.integers(1, 40))
    )
)
def test_collapsed_runs_expand_back_to_the_text(runs: list[tuple[str, int]]) -> None:
    text = "\n".join(line for line, n in runs for _ in range(n))
    out = collapse_runs(text)
    assert expand(out) == text
    assert len(out) <= len(text)
    assert collapse_runs(out) == out


def step(i: int, output: str) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "get", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": output},
    ]


PRETTY = json.dumps(
    [{"name": f"pkg{i}", "version": "1.0", "ok": True} for i in range(40)], indent=4
)


def test_the_newest_step_and_errors_are_left_alone() -> None:
    failed = "Traceback (most recent call last):\n" + "  File 'x.py'\n" * 40 + "ValueError: no"
    messages = step(0, PRETTY) + step(1, failed) + step(2, PRETTY)
    out = Lossless().apply(messages, COUNTER)
    assert out[1]["content"] == compact_json(PRETTY) != PRETTY
    assert out[3] is messages[3]
    assert out[5] is messages[5]


def test_text_parts_are_re_encoded_one_by_one() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = step(0, PRETTY) + step(1, "newest")
    messages[1]["content"] = [{"type": "text", "text": PRETTY}, image]
    out = Lossless().apply(messages, COUNTER)
    assert out[1]["content"] == [{"type": "text", "text": compact_json(PRETTY)}, image]


def test_the_engine_re_encodes_before_it_clears() -> None:
    counter = COUNTER
    messages = [{"role": "user", "content": "list the packages"}]
    for i in range(6):
        messages += step(i, PRETTY)
    messages.append({"role": "user", "content": "and now?"})
    before = count_prompt(counter, messages)
    result = fit(FitRequest(messages=messages, budget=int(before * 0.7), counter=counter))
    assert result.actions == ["lossless"]
    assert not any(CLEARED in str(m.get("content")) for m in result.messages)
    again = fit(FitRequest(messages=messages, budget=int(before * 0.7), counter=counter))
    assert [m.get("content") for m in again.messages] == [m.get("content") for m in result.messages]
