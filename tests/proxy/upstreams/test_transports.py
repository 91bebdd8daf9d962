"""The transport, and the test one respx mocks (tests/respx_transport.py), map a failure to the client the same way: 502 "could not be reached"
for a refused connection, 504 "did not answer in time" for an upstream that never answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from proxy.config.catalog import Upstream
from proxy.errors import UpstreamTimeout, UpstreamUnavailable
from proxy.upstreams.aiohttp_transport import AiohttpTransport
from proxy.upstreams.forwarding import Transport
from tests.respx_transport import HttpxTransport


@pytest.fixture
def silent() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("make", [AiohttpTransport, HttpxTransport])
async def test_one_error_mapping_for_every_transport(make: type[Transport], silent: int) -> None:
    transport = make()
    try:
        port = closed_port()
        refused = Upstream(base_url=f"http://127.0.0.1:{port}/v1")
        with pytest.raises(UpstreamUnavailable) as unreachable:
            await transport.send(refused, "POST", f"{refused.base_url}/x", [], b"{}")
        assert unreachable.value.status == 502
        assert str(unreachable.value).startswith("the upstream could not be reached: ")
        mute = Upstream(base_url=f"http://127.0.0.1:{silent}/v1", timeout=0.3)
        with pytest.raises(UpstreamTimeout) as late:
            await transport.send(mute, "POST", f"{mute.base_url}/x", [], b"{}")
        assert late.value.status == 504
        assert str(late.value).startswith("the upstream did not answer in time")
    finally:
        await transport.aclose()
