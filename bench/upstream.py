"""A fast mock OpenAI upstream for benchmarks: raw ASGI, a fixed answer, and SSE of any size.

``python -m bench.upstream PORT [DELAY_MS]``. A request whose body holds ``"stream_mb": N`` gets
N MiB of server-sent events; any other gets one small chat completion, after ``DELAY_MS`` (0: at
once, the proxy's pure overhead; 50: a fast LLM's time to answer).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson
import uvicorn

ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
)
DELAY = float(sys.argv[2]) / 1000 if __name__ == "__main__" and len(sys.argv) > 2 else 0.0
CHUNK = (
    b"data: "
    + orjson.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 1000}}]})
    + b"\n\n"
)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    parts = []  # a 32 MB body comes in hundreds of pieces: joined once, not copied each time
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(parts)
    seed = body.find(b'"stream_seed":')
    if seed >= 0:
        await _seeded_stream(int(body[seed + 14 :].split(b"}", 1)[0].split(b",", 1)[0]), send)
        return
    marker = body.find(b'"stream_mb":')
    if marker < 0:
        if DELAY:
            await asyncio.sleep(DELAY)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(ANSWER)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": ANSWER})
        return
    megabytes = int(body[marker + 12 :].split(b"}", 1)[0].split(b",", 1)[0])
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    for _ in range(megabytes * 1024 * 1024 // len(CHUNK)):
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def seeded_events(seed: int) -> list[bytes]:
    """The deterministic content of stream ``seed``: the load test checks every byte of it."""
    return [f"{seed}:{i}:{(seed * 7919 + i * 104729) % 1000003};".encode() for i in range(40)]


async def _seeded_stream(seed: int, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    for piece in seeded_events(seed):
        chunk = {"choices": [{"index": 0, "delta": {"content": piece.decode()}}]}
        await send(
            {
                "type": "http.response.body",
                "body": b"data: " + orjson.dumps(chunk) + b"\n\n",
                "more_body": True,
            }
        )
        await asyncio.sleep(0.005)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        http="httptools",
        loop="uvloop",
        server_header=False,
        date_header=False,
    )
