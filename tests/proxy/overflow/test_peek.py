"""The stream peek (proxy/overflow/peek.py): it reads past the preamble events up to the first
decisive one, and hands back every byte, in order, for the client."""

from __future__ import annotations

from collections.abc import AsyncIterator

from proxy.overflow.peek import MAX_CHUNKS, decisive, peek

CREATED = b'event: response.created\ndata: {"type": "response.created"}\n\n'
IN_PROGRESS = b'event: response.in_progress\ndata: {"type": "response.in_progress"}\n\n'
FAILED = b'event: response.failed\ndata: {"type": "response.failed", "response": {}}\n\n'
DELTA = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
PING = b'data: {"type": "ping"}\n\n'


class Source:
    """A stream of ``chunks`` that counts how many were read."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.read = chunks, 0

    async def __call__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.read += 1
            yield chunk


async def whole(stream: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in stream])


async def test_the_preamble_is_read_past_up_to_the_first_decisive_event() -> None:
    source = Source([CREATED, IN_PROGRESS, FAILED, DELTA, DELTA])
    seen, stream = await peek(source())
    assert seen == CREATED + IN_PROGRESS + FAILED and source.read == 3
    assert await whole(stream) == CREATED + IN_PROGRESS + FAILED + DELTA + DELTA


async def test_an_event_split_across_chunks_is_read_to_its_end() -> None:
    source = Source([DELTA[:10], DELTA[10:], DELTA])
    seen, stream = await peek(source())
    assert seen == DELTA and source.read == 2
    assert await whole(stream) == DELTA + DELTA


async def test_a_stream_of_preamble_alone_is_read_to_the_cap_and_kept_whole() -> None:
    pings = [PING] * (MAX_CHUNKS + 4)
    source = Source(pings)
    seen, stream = await peek(source())
    assert seen == PING * MAX_CHUNKS and source.read == MAX_CHUNKS
    assert await whole(stream) == b"".join(pings)


async def test_an_empty_stream_peeks_nothing() -> None:
    seen, stream = await peek(Source([])())
    assert seen == b"" and await whole(stream) == b""


def test_what_is_decisive() -> None:
    assert not decisive(CREATED + IN_PROGRESS)
    assert not decisive(b"data: {")  # an event still arriving
    assert decisive(CREATED + FAILED) and decisive(DELTA.replace(b"\n", b"\r\n"))
    assert not decisive(PING + b'event: message_start\ndata: {"type": "message_start"}\n\n')
