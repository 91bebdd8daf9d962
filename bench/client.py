"""Keep-alive HTTP/1.1 clients for the benchmarks: ``Connection``, a lean one on asyncio
streams, so the load generator costs little next to what it measures (httpx spends about a
millisecond of CPU per request); ``HttpxConnection``, the same calls through httpx, for the
latency a user's own client sees."""

from __future__ import annotations

import asyncio

import httpx


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        team: str | None = None,
    ) -> None:
        """``team``: sent as ``x-contextwarden-team`` (the proxy's team in passthrough)."""
        self._reader = reader
        self._writer = writer
        self._host = host
        self._team = f"x-contextwarden-team: {team}\r\n" if team else ""
        self.last_headers: dict[str, str] = {}  # the last answer's, lower-cased names

    @classmethod
    async def open(cls, host: str, port: int, team: str | None = None) -> Connection:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        return cls(reader, writer, f"{host}:{port}", team)

    async def post(self, path: str, body: bytes) -> tuple[int, int]:
        """Send one request; returns (status, body bytes read), the body discarded as it
        arrives."""
        status, size, _ = await self.request(path, body, keep=False)
        return status, size

    async def request(self, path: str, body: bytes, keep: bool) -> tuple[int, int, bytes]:
        """Send one request; returns (status, body size, the body if ``keep``)."""
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self._host}\r\ncontent-type: application/json\r\n"
            f"authorization: Bearer sk-bench\r\n{self._team}content-length: {len(body)}\r\n\r\n"
        ).encode()
        self._writer.write(head + body)
        raw = await self._reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {
            k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        self.last_headers = headers
        if "content-length" in headers:
            size = int(headers["content-length"])
            data = await self._reader.readexactly(size)
            return status, size, data if keep else b""
        kept: list[bytes] = []
        size = await self._chunked(kept if keep else None)
        return status, size, b"".join(kept)

    async def _chunked(self, kept: list[bytes] | None) -> int:
        total = 0
        while True:
            size = int((await self._reader.readline()).split(b";")[0], 16)
            if size == 0:
                await self._reader.readline()
                return total
            remaining = size
            while remaining:
                chunk = await self._reader.read(min(remaining, 1 << 20))
                if not chunk:
                    raise ConnectionError("connection closed mid-body")
                if kept is not None:
                    kept.append(chunk)
                remaining -= len(chunk)
            total += size
            await self._reader.readexactly(2)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


class HttpxConnection:
    """The same calls on one keep-alive ``httpx.AsyncClient`` connection, as an SDK sends
    them (``Authorization: Bearer``): for the latency figures beside the pass-through floor,
    what a user's own client sees, its cost included (the lean client above left out about a
    millisecond a request of httpx's own work, which a user's client does)."""

    def __init__(self, client: httpx.AsyncClient, team: str | None = None) -> None:
        self._client = client
        self._headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
        if team:
            self._headers["x-contextwarden-team"] = team
        self.last_headers: dict[str, str] = {}

    @classmethod
    async def open(cls, host: str, port: int, team: str | None = None) -> HttpxConnection:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        client = httpx.AsyncClient(base_url=f"http://{host}:{port}", limits=limits, timeout=None)
        return cls(client, team)

    async def post(self, path: str, body: bytes) -> tuple[int, int]:
        status, size, _ = await self.request(path, body, keep=False)
        return status, size

    async def request(self, path: str, body: bytes, keep: bool) -> tuple[int, int, bytes]:
        answer = await self._client.post(path, content=body, headers=self._headers)
        self.last_headers = dict(answer.headers)
        return answer.status_code, len(answer.content), answer.content if keep else b""

    async def close(self) -> None:
        await self._client.aclose()
