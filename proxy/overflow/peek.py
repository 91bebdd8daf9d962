"""The stream peek: an overflow can come as a 200 event stream whose first decisive event is an
error (SGLang's chat ``data: {"error": ...}``, Responses' ``response.failed``, Anthropic's
``error``). The peek reads past the preamble events that come before any output (Responses'
``response.created`` and ``response.in_progress``, Anthropic's ``message_start`` and ``ping``)
up to the first decisive one, and hands back every byte it read, in order, for the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson

PREAMBLE = frozenset({"response.created", "response.in_progress", "message_start", "ping"})
MAX_CHUNKS = 16
MAX_BYTES = 65536


async def peek(stream: AsyncIterator[bytes]) -> tuple[bytes, AsyncIterator[bytes]]:
    """The bytes read up to the first decisive event (or the end, or the caps), and the whole
    stream again from its start."""
    chunks: list[bytes] = []
    size = 0
    while len(chunks) < MAX_CHUNKS and size < MAX_BYTES:
        chunk = await anext(stream, None)
        if chunk is None:
            break
        chunks.append(chunk)
        size += len(chunk)
        if decisive(b"".join(chunks)):
            break
    seen = b"".join(chunks)
    return seen, _prepend(seen, stream)


def decisive(buffered: bytes) -> bool:
    """Whether the complete events so far include one past the preamble."""
    text = buffered.replace(b"\r\n", b"\n")
    complete = text.split(b"\n\n")[:-1]  # the last piece may be an event still arriving
    return any(_kind(event) not in PREAMBLE for event in complete if event.strip())


def _kind(event: bytes) -> str:
    """An event's name: its ``event:`` line, else its data's ``type``, else "data"."""
    data = b""
    for line in event.split(b"\n"):
        if line.startswith(b"event:"):
            return line[6:].strip().decode("utf-8", "replace")
        if line.startswith(b"data:"):
            data += line[5:].strip()
    if data.startswith(b"{"):
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            return "data"
        kind = parsed.get("type") if isinstance(parsed, dict) else None
        if isinstance(kind, str):
            return kind
    return "data" if data else "comment"


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if first:
        yield first
    async for chunk in rest:
        yield chunk
