"""Is an upstream answer a context-window overflow? One pure function, tested by a table.

Providers word the same failure a dozen ways (see SEMANTICS.md); we match each wording and pull
out the real limit and the counts the message gives, so the retry can shrink by the right amount.
Rate limits (429) and OpenAI's ``string_above_max_length`` (one field too long) are not overflows.

What may be read, and where:
- an error status's body: the error object's message, code and type (any provider's shape);
- a 200 event stream: only an *error event* (chat's ``data: {"error": {...}}``, Responses'
  ``response.failed`` or ``error``, Anthropic's ``event: error``). A healthy stream's other
  events echo the request (``response.created`` repeats ``instructions`` and ``tools``), so
  their text is never read: a stream with no error event is never an overflow;
- never text the client wrote. Providers repeat parts of the request in their errors (OpenAI
  names an unknown field in its 400, a validator quotes a bad value), and may join several
  such echoes in one message. So wording and figures are read from the message's **own text**
  (``own_text``): every string of the request that could carry them (a key or string value
  with a digit or a space in it) is masked wherever the message repeats it whole, so no
  match can join two echoed fields; and a match any of whose clauses still stands in the
  request as sent is the client's own text, not the upstream's verdict.

Whether the upstream said "overflow" at all: its wording, in its own text, or its overflow code
(``context_length_exceeded``); a code that names another failure (an unknown parameter, a
rate limit, one string too long) never is, whatever the message says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

NOT_OVERFLOW_STATUSES = frozenset({401, 402, 403, 404, 405, 408, 409, 429})
NOT_OVERFLOW_CODES = frozenset(
    {
        "string_above_max_length",
        "rate_limit_exceeded",
        "unknown_parameter",  # OpenAI's 400 for a field it does not know, named in the message
        "unsupported_parameter",
        "invalid_type",
        "invalid_value",
    }
)
MASK = "\0"  # stands for echoed text in ``own_text``: no pattern reads through it


@dataclass(frozen=True, slots=True)
class Overflow:
    """What the upstream told us: its limit and how many tokens it counted, when it said so."""

    limit: int | None = None
    prompt: int | None = None
    completion: int | None = None


def _n(text: str | None) -> int | None:
    """A figure of the message; None past 15 digits (no count has that many, and Python
    refuses to parse thousands of them: a 500)."""
    digits = text.replace(",", "") if text else ""
    return int(digits) if digits and len(digits) <= 15 else None


_NUM = r"([\d,]+)"
_GAP = ".*?"  # between two clauses of one wording
# Each pattern names the groups it captures: limit, prompt, total (prompt + completion), completion.
_SOURCES: tuple[str, ...] = (
    rf"maximum context length is {_NUM} tokens.*?requested (?:about )?(?P<total>{_NUM}) tokens"
    rf"(?: \((?P<prompt>{_NUM}) in the messages, (?P<completion>{_NUM}) in the completion\))?",
    rf"maximum context length is (?P<limit>{_NUM}) tokens"
    rf".*?resulted in (?P<prompt>{_NUM}) tokens",
    # vLLM since 0.10: "you requested 1000 output tokens and your prompt contains at least
    # 7800 input tokens, for a total of at least 8800 tokens".
    rf"maximum context length is (?P<limit>{_NUM}) tokens.*?requested (?P<completion>{_NUM}) "
    rf"output tokens and your prompt contains (?:at least )?(?P<prompt>{_NUM}) input tokens",
    rf"maximum context length is (?P<limit>{_NUM}) tokens",
    rf"prompt is too long: (?P<prompt>{_NUM}) tokens > (?P<limit>{_NUM}) maximum",
    rf"input length and `?max_tokens`? exceed context limit"
    rf"(?:: (?P<prompt>{_NUM}) \+ (?P<completion>{_NUM}) > (?P<limit>{_NUM}))?",
    rf"the input \((?P<prompt>{_NUM}) tokens\) is longer than the model's context length "
    rf"\((?P<limit>{_NUM}) tokens\)",
    rf"input token count \((?P<prompt>{_NUM})\) exceeds the maximum number of tokens allowed "
    rf"\((?P<limit>{_NUM})\)",
    rf"prompt contains (?P<prompt>{_NUM}) tokens.*?too large for model with (?P<limit>{_NUM}) "
    r"maximum context length",
    rf"prompt tokens \((?P<prompt>{_NUM})\) exceeds? model maximum \((?P<limit>{_NUM})\)",
    rf"current length is (?P<prompt>{_NUM}) while limit is (?P<limit>{_NUM})",
    r"input exceeds the context window",
    r"reduce the length of the messages",
    r"input is too long for requested model",
    r"too many input tokens",
    # LM Studio (lmstudio-bug-tracker #237, #546): "Trying to keep the first 10048 tokens when
    # context the overflows. However, the model is loaded with context length of only 8192
    # tokens, which is not enough."
    rf"keep the first (?P<prompt>{_NUM}) tokens when context the overflows.*?loaded with "
    rf"context length of only (?P<limit>{_NUM}) tokens",
    r"the model is loaded with context length of only",
    # llama.cpp's llama-server (tools/server/server-context.cpp), with its figures in the
    # message too: an error re-wrapped as a 500 server_error keeps only the message.
    rf"request \((?P<prompt>{_NUM}) tokens\) exceeds the available context size "
    rf"\((?P<limit>{_NUM}) tokens\)",
    rf"input \((?P<prompt>{_NUM}) tokens\) is larger than the max context size "
    rf"\((?P<limit>{_NUM}) tokens\)",
    r"exceeds the available context size",
    r"context[ _]length[ _]exceeded",
    r"exceeds? (?:the )?(?:model'?s? )?(?:maximum )?context (?:length|window)",
)
_FLAGS = re.IGNORECASE | re.DOTALL
_PATTERNS = tuple(re.compile(p, _FLAGS) for p in _SOURCES)
# Each wording's clauses (its parts between ``_GAP``s): each must be the upstream's own text.
_CLAUSES = tuple(tuple(re.compile(c, _FLAGS) for c in p.split(_GAP)) for p in _SOURCES)
# The first pattern captures the limit positionally (group 1) because "total" follows it.
_FIRST = _PATTERNS[0]


def is_context_overflow(
    status: int, body: bytes | str | dict[str, Any] | None, sent: bytes | None = None
) -> Overflow | None:
    """Return what the overflow said, or None when the answer is not a context overflow.

    ``sent``: the request body that was forwarded; wording found in it is the client's echo."""
    if status in NOT_OVERFLOW_STATUSES or (status < 400 and status != 200):
        return None
    if status == 200 and not _mentions_error(body):
        return None
    read = _message(body) if status != 200 else _stream_error(body)
    if read is None:
        return None
    message, code, extra = read
    if code in NOT_OVERFLOW_CODES:
        return None
    found = _match(message, sent)
    if found is None and code == "context_length_exceeded":
        found = Overflow()
    if found is None and extra.get("n_ctx") is not None and "context" in message.lower():
        found = Overflow()
    if found is None:
        return None
    if found.limit is None and isinstance(extra.get("n_ctx"), int):
        prompt = extra.get("n_prompt_tokens")
        found = Overflow(extra["n_ctx"], prompt if isinstance(prompt, int) else None)
    return found


def _match(message: str, sent: bytes | None = None) -> Overflow | None:
    if not message or not any(p.search(message) for p in _PATTERNS):
        return None  # the common case: no wording at all, nothing of the request is read
    echo = Echo(sent) if sent is not None else None
    own = echo.own_text(message) if echo is not None else message
    for index, pattern in enumerate(_PATTERNS):
        for m in pattern.finditer(own):
            if echo is not None and any(echo.stands_in(c) for c in _clauses(index, own, m)):
                continue  # the client's own words, repeated by the upstream
            return _figures(pattern, m)
    return None


def _figures(pattern: re.Pattern[str], m: re.Match[str]) -> Overflow:
    groups = m.groupdict()
    limit = _n(m.group(1)) if pattern is _FIRST else _n(groups.get("limit"))
    prompt = _n(groups.get("prompt"))
    completion = _n(groups.get("completion"))
    total = _n(groups.get("total"))
    if prompt is None and total is not None:
        prompt = total
    return Overflow(limit, prompt, completion)


def _clauses(index: int, text: str, m: re.Match[str]) -> list[str]:
    """The texts of a match's clauses, in order."""
    out, pos = [], m.start()
    for clause in _CLAUSES[index]:
        found = clause.search(text, pos, m.end())
        if found is None:  # a clause the whole pattern matched is there
            return [m.group(0)]
        out.append(found.group(0))
        pos = found.end()
    return out


def own_text(message: str, sent: bytes | None) -> str:
    """``message`` as the upstream wrote it: every string of the request ``sent`` that could
    carry an overflow's wording or figures (a JSON key or string value with a digit or a space)
    masked wherever the message repeats it whole (``MASK``). Figures are read from what is
    left, so a window stated across two echoed fields is never read."""
    return Echo(sent).own_text(message) if sent is not None else message


class Echo:
    """What an upstream may have repeated of the request it was sent."""

    def __init__(self, sent: bytes) -> None:
        self._sent = sent
        self._lowered: bytes | None = None

    def own_text(self, message: str) -> str:
        lowered = _folded(message)
        masked = list(message)
        for piece in _echoable(self._sent, len(message)):
            needle = _folded(piece)
            start = lowered.find(needle)
            while start >= 0:
                end = start + len(needle)
                if _bounded(lowered, start, end):
                    masked[start:end] = MASK * (end - start)
                start = lowered.find(needle, start + 1)
        return "".join(masked)

    def stands_in(self, span: str) -> bool:
        """Whether ``span`` stands in the request as sent, or in its decoded strings (a client
        may spell its text with JSON escapes that the upstream decodes before echoing it)."""
        if self._lowered is None:
            self._lowered = self._sent.lower()
        needle = span.encode("utf-8", "replace").lower()
        if needle in self._lowered:
            return True
        if b"\\u" not in self._sent:
            return False
        try:
            canonical = orjson.dumps(orjson.loads(self._sent))
        except orjson.JSONDecodeError:
            return False
        return needle in canonical.lower()


def _echoable(sent: bytes, longest: int) -> set[str]:
    """The request's keys and string values an upstream's message of ``longest`` characters
    could repeat whole and that could carry wording or figures: two characters or more, with
    a digit or a space in them (a single word, such as a tool's ``context`` parameter, is left:
    masking it would hide a real overflow's wording, and no wording is one word)."""
    try:
        root = orjson.loads(sent)
    except orjson.JSONDecodeError:
        return set()
    out: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
            out.update(k for k in node if _carries(k, longest))
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and _carries(node, longest):
            out.add(node)
    return out


def _carries(text: str, longest: int) -> bool:
    if not 2 <= len(text) <= longest:
        return False
    return any(c.isdigit() or c.isspace() for c in text)


def _folded(text: str) -> str:
    """``text`` lowercased character for character, so that a position in it is the same
    position in ``text``: ``str.lower`` lengthens U+0130 (İ) to two characters, and 60 of them
    before an echo moved its mask 60 characters off it, leaving two echoed fields to read as
    one wording. A character whose lowercase is longer than itself stays as it is."""
    lowered = text.lower()
    if len(lowered) == len(text):  # no character lengthened (and none ever shortens)
        return lowered
    return "".join(low if len(low := c.lower()) == 1 else c for c in text)


def _bounded(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is not part of a longer word or number."""
    before = start == 0 or not text[start - 1].isalnum()
    return before and (end == len(text) or not text[end].isalnum())


def _message(body: bytes | str | dict[str, Any] | None) -> tuple[str, str | None, dict[str, Any]]:
    """The error's text, its code and the error object, from any provider's error shape."""
    data: Any = body
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            return _sse_error(text) or (text, None, {})
    if not isinstance(data, dict):
        return (str(data) if data is not None else "", None, {})
    err = data.get("error", data)
    if isinstance(err, str):
        return err, _str(data.get("code")), data
    if not isinstance(err, dict):
        return "", None, {}
    message = err.get("message") or err.get("detail") or data.get("message") or ""
    code = _str(err.get("code")) or _str(err.get("type"))
    return (message if isinstance(message, str) else str(message)), code, err


def _stream_error(
    body: bytes | str | dict[str, Any] | None,
) -> tuple[str, str | None, dict[str, Any]] | None:
    """A 200 answer's error: its error event, or an error object read whole; None when the
    answer carries no error (whatever its text says)."""
    if isinstance(body, dict):
        return _message(body) if isinstance(body.get("error"), dict | str) else None
    if body is None:
        return None
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _sse_error(text)
    if isinstance(data, dict) and isinstance(data.get("error"), dict | str):
        return _message(data)
    return None


def _sse_error(text: str) -> tuple[str, str | None, dict[str, Any]] | None:
    """The first error event of an event stream: chat's ``data: {"error": {...}}`` (SGLang),
    Responses' ``response.failed`` (its ``response.error``) or Anthropic's ``error`` event."""
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload.startswith("{"):
            continue
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        if data.get("type") == "response.failed" and isinstance(data.get("response"), dict):
            data = data["response"]
        if isinstance(data.get("error"), dict | str):
            return _message(data)
        if data.get("type") == "error" and isinstance(data.get("message"), str):
            return _message(data)  # Responses' own error event: code and message at the top
    return None


def _mentions_error(body: bytes | str | dict[str, Any] | None) -> bool:
    if isinstance(body, dict):
        return "error" in body
    if isinstance(body, bytes):
        return b'"error"' in body
    return isinstance(body, str) and '"error"' in body


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
