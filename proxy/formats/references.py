"""Content a request names without carrying it, in any format: a Responses ``input_file`` or a
chat ``file`` part (by ``file_id``, ``file_url`` or ``file_data``: a PDF the upstream reads as
text and page images), an Anthropic ``document`` that is no plain text (a PDF, a URL, a file
id), a ``container_upload``, an image by file id.

The counter prices such a part by its JSON (strategies/tokens.py), which says nothing of what
the upstream reads: a request that holds one is counted far below the upstream's count. So it
teaches nothing about a window or a calibration (proxy/request/lessons.py): a figure-free
refusal of it would set the window at the proxy's tiny count.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.formats.reused_items import REUSE_FROM
from strategies.bounded_memory import ObjectMemo

# A small body (below ``REUSE_FROM``: its items are parsed afresh each time) is answered by
# its bytes first: a body without any of these keys or types holds no such part (``file"``
# ends both ``"input_file"`` and ``"file"``, one pass for two). JSON may spell a letter as an
# escape (``"input_fil\\u0065"`` is ``"input_file"`` to every parser): a body with an escape of
# an ASCII letter or ``_`` is walked whatever its bytes say, or one escaped letter would hide a
# file from the lessons (a figure-free window learned at the proxy's tiny count).
MARKERS = (b'file"', b'"document"', b'"container_upload"')
ESCAPE = b"\\u00"
ESCAPED_WORD = re.compile(rb"\\u00[4-7][0-9A-Fa-f]")
# A larger body's conversation items (chat and Messages ``messages``, Responses ``input``) are
# walked, each one's verdict kept by the item's identity: an agent resends its history at every
# step, and its earlier items are the very objects its last request parsed
# (proxy/formats/reused_items.py), so only its new items are walked. Its bytes were searched
# before: each search read the whole body (up to a millisecond each on a 118k-token resend,
# bench/resend.py), and ``file"`` matched any agent's ``"read_file"`` tool, which then had its
# whole history walked at every step. Parsed values need no care for escapes.
ITEMS = ("messages", "input")
PLAIN_SOURCES = frozenset({"text", "content"})  # a document whose text is in the request
HOLDS, HOLDS_NOT = b"\x01", b""
_VERDICTS = ObjectMemo()


def holds_references(body: bytes, payload: dict[str, Any]) -> bool:
    """Whether ``payload`` (parsed from ``body``) holds a part the proxy cannot count."""
    if len(body) < REUSE_FROM:
        if not any(marker in body for marker in MARKERS) and not _escapes_a_letter(body):
            return False
        return _walk(payload)[0]
    for key, value in payload.items():
        if key in ITEMS and isinstance(value, list):
            if any(_item_holds(item) for item in value):
                return True
        elif isinstance(value, dict | list) and _walk(value)[0]:
            return True
    return False


def _escapes_a_letter(body: bytes) -> bool:
    return ESCAPE in body and ESCAPED_WORD.search(body) is not None


def memory() -> ObjectMemo:
    """The items' verdicts, for the memory budget (proxy/observe/memory.py)."""
    return _VERDICTS


def _item_holds(item: Any) -> bool:
    if not isinstance(item, dict | list):
        return False
    known = _VERDICTS.get(item)
    if known is not None:
        return known == HOLDS
    holds, size = _walk(item)
    _VERDICTS.remember(item, HOLDS if holds else HOLDS_NOT, size)
    return holds


def _walk(root: dict[str, Any] | list[Any]) -> tuple[bool, int]:
    """Whether ``root`` holds a part the proxy cannot count; and about what it keeps alive
    (its strings' characters), the memo's measure of it."""
    size = 0
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        values = node.values() if isinstance(node, dict) else node
        if isinstance(node, dict) and _referenced(node):
            return True, size
        for v in values:
            if isinstance(v, dict | list):
                stack.append(v)
            elif isinstance(v, str):
                size += len(v)
    return False, size


def _referenced(part: dict[str, Any]) -> bool:
    kind = part.get("type")
    if kind in ("input_file", "container_upload"):
        return True
    if kind == "file":
        return isinstance(part.get("file"), dict)  # chat's file part
    source = part.get("source")
    if kind == "document" and isinstance(source, dict):
        return source.get("type") not in PLAIN_SOURCES
    if kind == "image" and isinstance(source, dict):
        return source.get("type") == "file"
    return False
