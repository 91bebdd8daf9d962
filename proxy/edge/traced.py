"""One fitted request (exchange.py) inside its OpenTelemetry span when telemetry is on
(proxy/observe/tracing.py), called as it is otherwise: the entry of the four formats' routes
and of the Responses WebSocket's turns."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from proxy.edge.exchange import handle
from proxy.formats.base import WireFormat

if TYPE_CHECKING:
    from proxy.runtime import Runtime


async def fitted(request: Request, rt: Runtime, fmt: WireFormat) -> Response:
    if rt.telemetry is None:
        return await handle(request, rt, fmt)
    return await rt.telemetry.served(fmt.name, partial(handle, request, rt, fmt))
