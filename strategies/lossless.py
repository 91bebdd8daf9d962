"""``lossless``: re-encode older tool outputs without losing a byte of meaning, before any is
cleared.

- JSON (an output that is a JSON document, one after a few header lines, or JSON Lines) loses
  its insignificant whitespace and nothing else: every string, number and key is copied as it
  was spelled, in its order, so the result parses back to the same value (a test holds it).
- A run of identical lines becomes the line once and ``[line repeated N more times]``, when
  that is shorter.

The result depends only on the output's text, so a re-encoded output has the same bytes in
every later request, and re-encoding it again changes nothing. The newest step's outputs and
error outputs are left as they came (strategies/outputs.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strategies.messages import Message
from strategies.outputs import rewritable
from strategies.tokens import Counter

REPEATED = "[line repeated {n} more times]"
MIN_RUN = 3  # shorter runs are left alone: the marker would save little or nothing
HEADER_LINES = 5  # lines before a JSON document that may be a header (a status, a URL)


@dataclass(frozen=True, slots=True)
class Lossless:
    min_chars: int = 200  # outputs shorter than this are left alone

    name = "lossless"

    def __post_init__(self) -> None:
        if self.min_chars < 0:
            raise ValueError("min_chars must be >= 0")

    def apply(self, messages: Sequence[Message], counter: Counter) -> list[Message]:
        out = list(messages)
        for i in rewritable(messages):
            out[i] = self._message(messages[i])
        return out

    def _message(self, message: Message) -> Message:
        content = message.get("content")
        if isinstance(content, str):
            text = self._text(content)
            return message if text is content else {**message, "content": text}
        if isinstance(content, list):
            parts = [self._part(p) for p in content]
            if any(a is not b for a, b in zip(parts, content, strict=True)):
                return {**message, "content": parts}
        return message

    def _part(self, part: Any) -> Any:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            text = self._text(part["text"])
            return part if text is part["text"] else {**part, "text": text}
        return part

    def _text(self, text: str) -> str:
        if len(text) < self.min_chars:
            return text
        out = collapse_runs(compact_json(text))
        return text if out == text else out


def compact_json(text: str) -> str:
    """``text`` with the JSON in it written without insignificant whitespace: the whole text,
    the rest after up to ``HEADER_LINES`` header lines, or each line of JSON Lines."""
    whole = _minified(text)
    if whole is not None:
        return whole
    lines = text.split("\n")
    if sum(1 for line in lines if line.strip()) >= 2:
        minified = [_minified(line) if line.strip() else line for line in lines]
        if all(m is not None for m in minified):
            return "\n".join(m for m in minified if m is not None)
    for k in range(1, min(HEADER_LINES, len(lines) - 1) + 1):
        rest = "\n".join(lines[k:])
        if rest.lstrip()[:1] in ("{", "["):
            body = _minified(rest)
            if body is not None:
                return "\n".join(lines[:k]) + "\n" + body
    return text


def _minified(text: str) -> str | None:
    """``text`` without insignificant whitespace, when it is one JSON object or array (with no
    key twice in one object: a parser keeps one of them, so dropping whitespace is the only
    safe rewrite and is done token by token); None otherwise."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return None
    try:
        json.loads(stripped, object_pairs_hook=_unique)
    except (ValueError, RecursionError):
        return None
    return _INSIGNIFICANT.sub(_keep_strings, stripped)


# A string token (kept as spelled) or whitespace outside strings (dropped).
_INSIGNIFICANT = re.compile(r'("(?:[^"\\]|\\.)*")|[ \t\n\r]+')


def _keep_strings(match: re.Match[str]) -> str:
    return match.group(1) or ""


class _Duplicate(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate
    return out


def collapse_runs(text: str) -> str:
    """Each run of ``MIN_RUN`` or more identical lines as the line once and a count, when the
    count is shorter than the lines it stands for."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i + 1
        while j < len(lines) and lines[j] == lines[i]:
            j += 1
        run = j - i
        marker = REPEATED.format(n=run - 1)
        if run >= MIN_RUN and len(marker) < (len(lines[i]) + 1) * (run - 1):
            out += [lines[i], marker]
        else:
            out += lines[i:j]
        i = j
    return "\n".join(out)
