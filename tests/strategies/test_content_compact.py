from __future__ import annotations

import json
from typing import Any

from strategies.content_compact import ContentCompact, compact_log, outline
from strategies.json_digest import digest
from strategies.microcompact import ToolResultMicrocompact
from strategies.outputs import HANDLE, handle_of
from tests.counters import FixedCounter

C = FixedCounter(10)
PACKAGES = [{"name": f"pkg{i}", "version": f"1.{i}", "deps": ["a", "b"]} for i in range(200)]


def step(i: int, output: str, name: str = "run", args: dict[str, Any] | None = None) -> list[Any]:
    arguments = json.dumps(args or {"n": i})
    call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": output},
    ]


def test_a_large_json_array_keeps_its_ends_a_count_and_the_schema() -> None:
    short, omitted = digest(PACKAGES)
    value = json.loads(short)
    assert value[0] == PACKAGES[0] and value[-1] == PACKAGES[-1]
    assert value[1] == (
        '… 198 more items of 200, each like {"name":"string","version":"string","deps":["string"]}'
    )
    assert omitted.items == 198


def test_a_mapping_of_same_shaped_values_is_shortened_and_distinct_fields_kept() -> None:
    index = {
        "info": {"name": "x", "summary": "s" * 500, "version": "2.0"},
        "releases": {f"0.{i}": [{"filename": f"x-0.{i}.whl", "size": i}] for i in range(30)},
    }
    short, omitted = digest(index)
    value = json.loads(short)
    assert value["info"]["name"] == "x" and value["info"]["version"] == "2.0"
    assert value["info"]["summary"].endswith("(500 characters in all)")
    assert list(value["releases"]) == ["0.0", "…", "0.29"]
    assert value["releases"]["…"].startswith("28 more entries, keys '0.1' .. '0.28'")
    assert omitted.entries == 28


def test_a_log_keeps_its_warnings_with_context_and_counts_the_rest() -> None:
    lines = [f"INFO step {i}" for i in range(100)]
    lines[50] = "WARNING: cache is cold"
    out = compact_log("\n".join(lines))
    assert out is not None
    assert out.startswith("[log compacted: kept 11 of 100 lines")
    body = out.split("\n")[1:]
    assert body[:3] == ["INFO step 0", "INFO step 1", "INFO step 2"]
    assert "[… 45 lines left out]" in body
    assert body[body.index("WARNING: cache is cold") - 2] == "INFO step 48"
    assert body[-3:] == ["INFO step 97", "INFO step 98", "INFO step 99"]


def test_a_file_read_keeps_its_path_and_outline() -> None:
    source = "\n".join(
        f"{k:>6}→{line}"
        for k, line in enumerate(
            ["import os", "", "class Engine:", "    def fit(self):", "        return 1"] * 30, 1
        )
    )
    out = outline(source, "src/engine.py")
    assert out is not None
    lines = out.split("\n")
    assert lines[0].startswith("[file read compacted: src/engine.py, 150 lines")
    assert lines[1:3] == ["3: class Engine:", "4: def fit(self):"]
    assert len(lines) == 61


def test_the_pass_compacts_older_outputs_by_kind_and_names_handles() -> None:
    pretty = json.dumps(PACKAGES, indent=2)
    log = "\n".join(f"downloading part {i} of 300" for i in range(300))
    code = "\n".join(f"def f{i}():\n    return {i}\n" for i in range(200))
    messages = (
        step(0, pretty)
        + step(1, log)
        + step(2, code, "read_file", {"path": "f.py"})
        + step(3, code, "bash", {"command": "cat g.py"})
        + step(4, "newest")
    )
    out = ContentCompact(keep_recent=1, handles=True).apply(messages, C)
    texts = [m["content"] for m in out if m["role"] == "tool"]
    assert texts[0].startswith("[JSON compacted: left out 198 array items; recall: r")
    assert texts[1].startswith("[log compacted: kept 6 of 300 lines")
    assert texts[2].startswith("[file read compacted: f.py, 600 lines")
    assert texts[3] == code  # the newest of the older outputs is kept (keep_recent=1)
    assert texts[4] == "newest"
    for before, after in zip(messages[1::2], out[1::2], strict=True):
        if after is not before:
            assert HANDLE.search(after["content"]).group(0) == handle_of(before)  # type: ignore[union-attr]
    again = ContentCompact(keep_recent=1, handles=True).apply(out, C)
    assert all(a is b for a, b in zip(again, out, strict=True))  # idempotent


def test_a_cleared_digest_keeps_the_handle_of_its_original() -> None:
    messages = step(0, json.dumps(PACKAGES, indent=2)) + step(1, "newest")
    compacted = ContentCompact(keep_recent=0, handles=True).apply(messages, C)
    cleared = ToolResultMicrocompact(keep_recent=0, handles=True).apply(compacted, C)
    assert cleared[1]["content"].startswith("[Tool result cleared to save context")
    assert HANDLE.search(cleared[1]["content"]).group(0) == handle_of(messages[1])  # type: ignore[union-attr]


def test_an_error_or_a_small_output_is_left_alone() -> None:
    failing = "\n".join(["collecting ..."] * 10 + [f"test_{i} PASSED" for i in range(80)])
    failing += "\nFAILED tests/test_x.py::test_y - assert 1 == 2\n= 1 failed, 80 passed ="
    messages = step(0, failing) + step(1, "short\n" * 10) + step(2, "newest")
    out = ContentCompact(keep_recent=0).apply(messages, C)
    assert out[1] is messages[1] and out[3] is messages[3]
