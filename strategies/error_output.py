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
from collections.abc import Iterable

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
_EXIT = re.compile(
    r"exit (?:status|code)[:= ]+[1-9]\d*"
    r"|process exited with code [1-9]\d*"
    r"|returned non-zero exit status"
    r"|\b[1-9]\d* (?:failed|errors?)\b"
    r"|^(?:failed|error) [\w./-]+::"
    r"|^error\[e\d+\]",
    re.IGNORECASE | re.MULTILINE,
)


def is_error_output(text: str) -> bool:
    """Whether ``text``, a tool's output, reads as an error log (see the module docstring)."""
    if len(text) < MIN_CHARS:
        return False
    head = text[:SCAN_CHARS]
    tail = text[-SCAN_CHARS:] if len(text) > SCAN_CHARS else ""
    return any(_marked(part) for part in (head, tail) if part)


def is_error_texts(texts: Iterable[str]) -> bool:
    """``is_error_output`` over an output given as several text parts."""
    return is_error_output("\n".join(texts))


def _marked(text: str) -> bool:
    lower = text.lower()
    if not any(m in lower for m in STRONG_MARKERS) and not _EXIT.search(text):
        return False
    return any(_log_line_marked(line) for line in text.split("\n"))


def _log_line_marked(line: str) -> bool:
    numbered = _LINE_NUMBER.match(line)
    body = line[numbered.end() :] if numbered else line
    trimmed = body.lstrip(" \t")
    if trimmed.startswith(COMMENTS) or _is_code(trimmed):
        return False
    lower = trimmed.lower()
    return any(m in lower for m in STRONG_MARKERS) or bool(_EXIT.search(trimmed))


def _is_code(trimmed: str) -> bool:
    word = _LEAD_WORD.match(trimmed)
    return word is not None and word.group(1) in CODE_KEYWORDS


def is_error_result(message: Message) -> bool:
    """Whether ``message`` is a tool's output that is an error: flagged (an Anthropic
    ``tool_result`` with ``is_error``) or reading as one (``is_error_output``)."""
    if message.get("role") not in ANSWERING:
        return False
    return message.get("is_error") is True or is_error_texts(iter_text(message))
