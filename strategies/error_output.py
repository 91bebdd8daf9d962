"""Whether a tool output reads as an error: never cleared, compacted or trimmed.

Chat and Responses tool results carry no ``is_error`` flag, so a failed build's log would be
cleared like any other output. The reference (ggcode's ``hasSemanticImportance``, read from its
source) recognises an error log by its content:

- an output under 50 characters is not one (too short to hold a useful log);
- its first 2,000 characters hold one of the strong markers (``error:``, ``fail:``,
  ``failed:``, ``panic:``, ``fatal:``, ``undefined:``, ``cannot find``, ``does not compile``,
  ``syntax error``, ``type error``, ``referenceerror``, ``typeerror:``, ``traceback (most
  recent call last)``), case-insensitively, on a line that is not a comment (``//``, ``#``,
  ``/*``).

Beyond it, because an agent's failed command is just as often told by how it ended:

- its last 2,000 characters are read the same way (a compiler and a test runner report last);
- a failed command's exit status (``exit status 2``, ``exit code: 1``, ``Process exited with
  code 1``, ``returned non-zero exit status``), a test runner's failure count (``3 failed``),
  ``FAILED`` / ``ERROR`` test lines and Rust's ``error[E0308]`` are errors too;
- a line of source code (one that opens with a keyword: ``except ValueError:``, ``raise``,
  ``catch``, ``if err != nil``), like a comment, is not: a file read of code that handles
  errors is not an error log. A file read's line-number prefix (``  12→``, ``12:``, ``12\\t``)
  is looked through.
"""

from __future__ import annotations

import re

from strategies.bounded_memory import ObjectMemo
from strategies.messages import ANSWERING, Message, iter_text

MIN_CHARS = 50
SCAN_CHARS = 2000
STRONG_MARKERS = (
    "error:",
    "fail:",
    "failed:",
    "panic:",
    "fatal:",
    "undefined:",
    "cannot find",
    "does not compile",
    "syntax error",
    "type error",
    "referenceerror",
    "typeerror:",
    "traceback (most recent call last)",
)
COMMENTS = ("//", "#", "/*")
# A line that opens with one of these is code, not a log line.
CODE_KEYWORDS = frozenset(
    {
        "except",
        "raise",
        "catch",
        "throw",
        "class",
        "def",
        "func",
        "fn",
        "if",
        "elif",
        "else",
        "return",
        "assert",
        "import",
        "from",
        "case",
        "const",
        "let",
        "var",
        "pub",
        "type",
        "interface",
        "export",
        "async",
        "await",
        "with",
        "try",
        "finally",
        "while",
        "for",
        "yield",
        "@",
        "*",
    }
)
_LINE_NUMBER = re.compile(r"^\s*\d+(?:→|\t|:\s|\|)")
_LEAD_WORD = re.compile(r"^([A-Za-z_]+|[@*])")
# Read on the lowercased text (as case-insensitive as before, and about ten times faster than
# one case-insensitive pattern over 2,000 characters: bench.decision's 128k fresh cut spent
# 86 ms of its 105 here). Each pattern is tried only when its words are in the text.
_EXIT = re.compile(
    r"exit (?:status|code)[:= ]+[1-9]\d*"
    r"|process exited with code [1-9]\d*"
    r"|returned non-zero exit status"
)
_RUNNER = re.compile(r"(?:^|\n)(?:(?:failed|error) [\w./-]+::|error\[e\d+\])")
_RUNNER_STARTS = ("failed ", "error ", "error[")
_RUNNER_LINES = tuple(f"\n{start}" for start in _RUNNER_STARTS)


def _exited(lower: str) -> bool:
    """Whether ``lower`` (a lowercased text) tells a failed command's exit, a test runner's
    failure count or its ``FAILED``/``ERROR`` lines, or Rust's ``error[E0308]``."""
    if ("exit" in lower or "non-zero" in lower) and _EXIT.search(lower):
        return True
    runner = lower.startswith(_RUNNER_STARTS) or any(line in lower for line in _RUNNER_LINES)
    if runner and _RUNNER.search(lower):
        return True
    return _counted(lower, " failed") or _counted(lower, " error")


def _counted(lower: str, word: str) -> bool:
    """A count of failures (``3 failed``, ``1 error``, ``2 errors``): ``word`` after a number
    that starts a word, and itself a whole word."""
    at = lower.find(word)
    while at != -1:
        end = at + len(word)
        if word == " error" and lower.startswith("s", end):
            end += 1 if not _word_char(lower, end + 1) else 0
        if not _word_char(lower, end):
            first = at
            while first > 0 and lower[first - 1].isdecimal():
                first -= 1
            if first < at and lower[first] in "123456789" and not _word_char(lower, first - 1):
                return True
        at = lower.find(word, at + 1)
    return False


def _word_char(text: str, i: int) -> bool:
    """Whether ``text[i]`` is a regular expression's word character (none outside the text)."""
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")


def is_error_output(text: str) -> bool:
    """Whether ``text``, a tool's output, reads as an error log (see the module docstring)."""
    if len(text) < MIN_CHARS:
        return False
    head = text[:SCAN_CHARS]
    tail = text[-SCAN_CHARS:] if len(text) > SCAN_CHARS else ""
    return any(_marked(part) for part in (head, tail) if part)


def _marked(text: str) -> bool:
    lower = text.lower()
    if not any(m in lower for m in STRONG_MARKERS) and not _exited(lower):
        return False
    return any(_log_line_marked(line) for line in text.split("\n"))


def is_error_line(line: str) -> bool:
    """Whether one line of an output reads as an error or failure line: a marker or a failed
    exit, not in a comment or a line of code; or a test runner's or build tool's own failure
    line (pytest -v's ``test_x FAILED [ 50%]``, unittest's ``FAIL``, TAP's ``not ok``, Jest's
    ``FAIL src/x.test.js``, make's ``*** ... Error 2``, ``npm ERR!``). What a cut inside an
    output keeps (strategies/step_cut.py); the output's own reading is unchanged."""
    return _FAILURE_LINE.search(line) is not None or _log_line_marked(line)


# Failure lines in the runners' own words: upper-case status words, TAP and the build tools.
_FAILURE_LINE = re.compile(
    r"(?:^|[\s:\]])(?:FAILED|FAILURE|FAIL|ERROR)(?=$|[\s:\[(])"
    r"|^\s*not ok\b"
    r"|^npm ERR!"
    r"|\*\*\* .*\bError\b"
    r"|^\s*(?:\u2715|\u2717|\u00d7) "
)


def _log_line_marked(line: str) -> bool:
    numbered = _LINE_NUMBER.match(line)
    body = line[numbered.end() :] if numbered else line
    trimmed = body.lstrip(" \t")
    if trimmed.startswith(COMMENTS) or _is_code(trimmed):
        return False
    lower = trimmed.lower()
    return any(m in lower for m in STRONG_MARKERS) or _exited(lower)


def _is_code(trimmed: str) -> bool:
    word = _LEAD_WORD.match(trimmed)
    return word is not None and word.group(1) in CODE_KEYWORDS


def is_error_result(message: Message) -> bool:
    """Whether ``message`` is a tool's output that is an error: flagged (an Anthropic
    ``tool_result`` with ``is_error``) or reading as one (``is_error_output``). Remembered by
    the message object: every pass of a fit asks of each output, and a conversation's next
    request holds the same objects (proxy/formats/reused_items.py)."""
    if message.get("role") not in ANSWERING:
        return False
    if message.get("is_error") is True:
        return True
    known = _READ.get(message)
    if known is not None:
        return known == ERROR
    text = "\n".join(iter_text(message))
    error = is_error_output(text)
    _READ.remember(message, ERROR if error else NOT_ERROR, len(text))
    return error


ERROR, NOT_ERROR = b"\x01", b""
_READ = ObjectMemo()  # each output message's reading, by the message object


def memory() -> ObjectMemo:
    """The outputs' readings, for the proxy's memory budget (proxy/observe/memory.py)."""
    return _READ
