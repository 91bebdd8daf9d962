"""A WebSocket handshake on the Responses routes gets an HTTP 426 (Codex then sends its request
by HTTPS at once; tests/clients/test_use_it_with.py runs the real CLI), on a real server."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import orjson
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.edge.websockets import DenialNoise


async def handshake(url: str) -> InvalidStatus:
    try:
        async with websockets.connect(url):
            pass
    except InvalidStatus as exc:
        return exc
    raise AssertionError("the handshake was accepted")


@pytest.mark.parametrize("path", ["/v1/responses", "/responses"])
def test_the_handshake_is_refused_with_426_in_openais_shape(
    path: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "upstreams": {"openai": {"base_url": "http://127.0.0.1:9/v1"}},
        "default_upstream": "openai",
        "data_dir": str(tmp_path),
    }
    # uvicorn's own loggers do not propagate to the root, where caplog listens, and the
    # server's start configures them afresh: caplog's handler is added once it has started.
    uvicorn_error = logging.getLogger("uvicorn.error")
    with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
        uvicorn_error.addHandler(caplog.handler)
        try:
            refused = asyncio.run(handshake(proxy.url.replace("http://", "ws://") + path))
        finally:
            uvicorn_error.removeHandler(caplog.handler)
    assert refused.response.status_code == 426
    error = orjson.loads(refused.response.body)["error"]
    assert error["code"] == "websocket_not_supported"
    assert "POST" in error["message"]
    assert not [r for r in caplog.records if "handshake" in r.getMessage()]


def test_only_the_denials_line_is_dropped() -> None:
    noise = DenialNoise()

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("uvicorn.error", logging.ERROR, "", 0, message, None, None)

    assert not noise.filter(record("ASGI callable returned without completing handshake."))
    assert noise.filter(record("Exception in ASGI application\n"))
