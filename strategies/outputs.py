"""Tool outputs as the compaction passes see them: which ones a pass may rewrite, their text,
and the handle that names an original the proxy keeps for recall.

A pass never rewrites the newest step's outputs (the results of the last assistant message
that made calls: what the model acts on next), nor an error output (strategies/error_output.py).
The engine protects the leading instructions, the task and, in a running task, the newest step
on top of that (strategies/engine.py).

The handle depends only on the call's id and the output's text, so a rewritten output names
the same handle in every later request (the cached prefix survives), and the proxy finds the
original under it (proxy/request/recall.py).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

from strategies.error_output import is_error_result
from strategies.messages import ANSWERING, Message, iter_text, result_role

# A handle is "r" and 15 decimal digits (48 bits): a tokenizer reads digits three at a time,
# so every handle costs the same tokens (five, in o200k and cl100k), which a cut's floor can
# price exactly; 12 hex digits cost from 8 to 17 (tests/strategies/test_step_cut.py). The
# hex form of earlier releases is still read, for the handles clients already hold.
HANDLE = re.compile(r"\br(?:[0-9]{15}|[0-9a-f]{12})\b")


def handle_text(h: hashlib.blake2b) -> str:
    """The handle a digest of 6 bytes names (``HANDLE``)."""
    return f"r{int.from_bytes(h.digest(), 'big'):015d}"


def output_text(message: Message) -> str:
    """A tool output's text (its text parts joined by newlines)."""
    content = message.get("content")
    return content if isinstance(content, str) else "\n".join(iter_text(message))


def handle_of(message: Message) -> str:
    """The recall handle of a tool output, as it was before any pass rewrote it."""
    h = hashlib.blake2b(digest_size=6)
    h.update(str(message.get("tool_call_id", "")).encode())
    h.update(b"\0")
    h.update(output_text(message).encode("utf-8", "surrogatepass"))
    return handle_text(h)


def handle_for(message: Message) -> str | None:
    """The handle a rewritten output names: the one its text names already (a digest that is
    now cleared keeps its original's), else its own; None for an output with no call id (a
    legacy ``function`` result), which cannot be recalled."""
    if message.get("role") != "tool" or not isinstance(message.get("tool_call_id"), str):
        return None
    text = output_text(message)
    if text.startswith("["):
        found = HANDLE.search(text.split("\n", 1)[0])
        if found is not None:
            return found.group(0)
    return handle_of(message)


def named(text: str, original: Message, handles: bool) -> str:
    """``text``, a placeholder or digest that opens with a bracketed line standing for
    ``original``, naming the handle that recalls it (when ``handles``)."""
    handle = handle_for(original) if handles else None
    if handle is None:
        return text
    head, bracket, rest = text.partition("]")
    if not bracket:
        return f"{text} recall: {handle}"
    return f"{head.rstrip('.')}; recall: {handle}]{rest}"


def newest_step(messages: Sequence[Message]) -> range:
    """The indices of the newest step's outputs: those after the last assistant message that
    made calls (empty when none did)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            answers = result_role(messages[i])
            if answers is None:
                return range(0)
            end = i + 1
            while end < len(messages) and messages[end].get("role") == answers:
                end += 1
            return range(i + 1, end)
    return range(0)


def rewritable(messages: Sequence[Message]) -> Iterator[int]:
    """Indices of the tool outputs a pass may rewrite, oldest first: not in the newest step,
    not an error, with text."""
    newest = newest_step(messages)
    for i, m in enumerate(messages):
        if m.get("role") not in ANSWERING or i in newest:
            continue
        if is_error_result(m):
            continue
        yield i


def with_text(message: Message, text: str) -> Message:
    """``message`` with ``text`` as its whole content (a list of parts becomes one text part,
    so the wire formats write it back as they write a cleared output)."""
    return {**message, "content": text}
