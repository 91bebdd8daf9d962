"""Error outputs are told by their content: the reference's vectors (ggcode's
``TestHasSemanticImportance`` and ``TestClearOldToolResults_*Importance*``), then ours."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.error_output import _exited, is_error_output, is_error_result
from strategies.light_trim import LightTrim
from strategies.microcompact import CLEARED, ToolResultMicrocompact
from tests.counters import FixedCounter

# ggcode internal/context/manager_test.go, TestHasSemanticImportance, verbatim.
REFERENCE = [
    ("empty", "", False),
    ("short", "ok", False),
    ("normal code", "package main\n" * 10, False),
    ("build error", "main.go:10:5: undefined: foo (and more context here)", True),
    ("panic", "panic: runtime error: index out of range [0] with length 0", True),
    ("fatal", "fatal: not a git repository (or any parent up to mount point)", True),
    ("syntax error", "syntax error: unexpected token 'foo' at line 5 column 10", True),
    ("python traceback", 'Traceback (most recent call last):\n  File "test.py"', True),
    ("type error", "TypeError: Cannot read properties of undefined (reading 'x')", True),
    ("test failure", "FAIL: test_foo/bar [0.001s] -- expected true got false", True),
    ("compiler error", 'error: cannot find package "foo" in any of /go/src', True),
    ("normal file listing", "drwxr-xr-x 2 user user 4096 Jan 1 file\n" * 50, False),
    ("normal function", "func processData(input string) string {\n    return input\n}", False),
    ("error in comment", "// handle error gracefully\n" * 50, False),
]

PYTEST_FAILURE = (
    "............F.....\n"
    "=================================== FAILURES ===================================\n"
    "___________________________________ test_fit ___________________________________\n"
    "    def test_fit() -> None:\n"
    ">       assert fit([]) == 1\n"
    "E       assert 0 == 1\n"
    "tests/test_engine.py:12: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_engine.py::test_fit - assert 0 == 1\n"
    "========================= 1 failed, 17 passed in 0.31s =========================\n"
)
OURS = [
    ("a failed command's exit status", "building the project\n" * 5 + "exit status 2", True),
    (
        "codex's exit code",
        "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nno such file here\n",
        True,
    ),
    (
        "a success's exit code",
        "Exit code: 0\nWall time: 0.2 seconds\nOutput:\nall good here, ok\n",
        False,
    ),
    (
        "pytest's failure at the end, past 2,000 characters",
        "." * 3000 + "\n" + PYTEST_FAILURE,
        True,
    ),
    ("pytest passing", "." * 80 + "\n== 18 passed in 0.30s ==\n", False),
    (
        "rust",
        "   Compiling app v0.1.0\nerror[E0308]: mismatched types\n --> src/main.rs:4:5\n",
        True,
    ),
    (
        "a file read of code that handles errors",
        "\n".join(
            f"{i:>6}→{line}"
            for i, line in enumerate(
                [
                    "try:",
                    "    x = load()",
                    "except ValueError:",
                    "    raise BadInput('no') from None",
                ]
                * 8
            )
        ),
        False,
    ),
    (
        "a Python traceback's last line",
        '  File "app.py", line 3, in <module>\n' * 3 + "ValueError: invalid literal for int()",
        True,
    ),
]


@pytest.mark.parametrize(("name", "text", "expected"), REFERENCE + OURS)
def test_an_output_reads_as_an_error_by_its_content(name: str, text: str, expected: bool) -> None:
    assert is_error_output(text) is expected, name


def step(i: str, output: str, name: str = "run_command") -> list[dict[str, Any]]:
    call = {"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": i, "content": output},
    ]


def result(messages: list[dict[str, Any]], i: str) -> str:
    return next(m["content"] for m in messages if m.get("tool_call_id") == i)


def test_a_failed_builds_output_is_never_cleared_flag_or_not() -> None:
    """ggcode's TestClearOldToolResults_SemanticImportancePreserved, with no is_error flag
    (chat and Responses results never carry one)."""
    messages = step("err-build", "exit status 1\nmain.go:10:5: error: undefined: processData")
    messages += step("ok-read", "line of code\n" * 50, "read_file")
    out = ToolResultMicrocompact(keep_recent=0).apply(messages, FixedCounter(10))
    assert not result(out, "err-build").startswith(CLEARED)
    assert result(out, "ok-read").startswith(CLEARED)


def test_mixed_importance() -> None:
    """ggcode's TestClearOldToolResults_MixedImportance: the errors stay, the oldest normal
    result beyond the kept ones goes."""
    outputs = {
        "r1": "normal content line\n" * 50,
        "r2": "panic: something went wrong\n" + "x" * 500,
        "r3": "another file\n" * 50,
        "r4": "FAIL: test_bar/baz [0.003s]\n" + "y" * 500,
    }
    messages = [m for i, text in outputs.items() for m in step(i, text)]
    out = ToolResultMicrocompact(keep_recent=1).apply(messages, FixedCounter(10))
    assert result(out, "r1").startswith(CLEARED)
    assert result(out, "r2") == outputs["r2"]
    assert result(out, "r3") == outputs["r3"]
    assert result(out, "r4") == outputs["r4"]


def test_light_trim_leaves_an_error_whole() -> None:
    log = "Traceback (most recent call last):\n" + "  frame\n" * 1000
    messages = step("a", log) + step("b", "x" * 9000)
    out = LightTrim(keep_recent=0).apply(messages, FixedCounter(10))
    assert result(out, "a") == log
    assert "characters trimmed" in result(out, "b")


def test_only_tool_outputs_are_error_results() -> None:
    text = "Traceback (most recent call last):\n  File 'x.py'\nValueError: no"
    assert is_error_result({"role": "tool", "content": [{"type": "text", "text": text}]})
    assert not is_error_result({"role": "user", "content": text})
    assert is_error_result({"role": "tool", "content": "ok", "is_error": True})


# The one case-insensitive pattern the exit and runner markers were read with before they were
# split for speed: the split must say the same of every text.
ONE_PATTERN = re.compile(
    r"exit (?:status|code)[:= ]+[1-9]\d*"
    r"|process exited with code [1-9]\d*"
    r"|returned non-zero exit status"
    r"|\b[1-9]\d* (?:failed|errors?)\b"
    r"|^(?:failed|error) [\w./-]+::"
    r"|^error\[e\d+\]",
    re.IGNORECASE | re.MULTILINE,
)
PIECES = [
    "exit status ",
    "Exit code: ",
    "exit code=",
    "Process exited with code ",
    "returned non-zero exit status",
    " failed",
    " FAILED",
    " errors",
    " error",
    "error",
    "Error",
    "failed ",
    "FAILED ",
    "ERROR ",
    "error[E",
    "::",
    "tests/x.py",
    "\n",
    " ",
    "0",
    "1",
    "2",
    "12",
    "a",
    "_",
    "-",
    "e0308]",
    "[",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14))
def test_the_split_exit_markers_say_what_the_one_pattern_said(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _exited(text.lower()) == bool(ONE_PATTERN.search(text)), text
