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

# Cheap first: a body without any of these keys or types holds no such part (``file"`` ends
# both ``"input_file"`` and ``"file"``, one pass for two). JSON may spell a letter as an escape
# (``"input_fil\\u0065"`` is ``"input_file"`` to every parser): a body with an escape of an
# ASCII letter or ``_`` is walked whatever its bytes say, or one escaped letter would hide a
# file from the lessons (a figure-free window learned at the proxy's tiny count).
MARKERS = (b'file"', b'"document"', b'"container_upload"')
ESCAPE = b"\\u00"
ESCAPED_WORD = re.compile(rb"\\u00[4-7][0-9A-Fa-f]")
PLAIN_SOURCES = frozenset({"text", "content"})  # a document whose text is in the request


def holds_references(body: bytes, payload: dict[str, Any]) -> bool:
    """Whether ``payload`` (parsed from ``body``) holds a part the proxy cannot count."""
    if not any(marker in body for marker in MARKERS) and not _escapes_a_letter(body):
        return False
    stack: list[Any] = [payload]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if _referenced(node):
                return True
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return False


def _escapes_a_letter(body: bytes) -> bool:
    return ESCAPE in body and ESCAPED_WORD.search(body) is not None


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
