"""Every route that reads a body goes through the one admission (proxy/edge/admission.py): the
routes are listed from the app itself, and each one that takes a body is sent one over the node
cap, which only ``Admission.admit`` refuses. A route added later that reads its body some other
way answers something else, and this test names it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.routing import Route

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.paths import DEFAULT_FORWARD
from tests.security.conftest import ADMIN_KEY, OTHER_KEY, Capture, keys_config

BODY_METHODS = ("POST", "PUT", "PATCH")
CAP = 1000
# Forwarded paths the catch-all route is tried with: the default allowlist and one outside it.
FORWARDED = [p.replace("*", "speech") for p in DEFAULT_FORWARD] + ["files", "batches"]


def over_the_cap(kind: str) -> bytes:
    """A small body (a few KB) with more JSON values than the cap: objects, numbers, strings."""
    if kind == "strings":
        return orjson.dumps({"model": "gpt-4o", "prompt": ["a"] * (CAP * 2)})
    if kind == "numbers":
        return orjson.dumps({"model": "gpt-4o", "input": [1] * (CAP * 2)})
    return orjson.dumps({"model": "gpt-4o", "input": [{"role": "user"}] * CAP})


def concrete(path: str) -> list[str]:
    """The route's path with sample values for its parameters."""
    if "{subpath:path}" in path:
        return [path.replace("{subpath:path}", p) for p in FORWARDED]
    return [re.sub(r"\{(\w+)(:\w+)?\}", lambda m: SAMPLES.get(m.group(1), "x"), path)]


SAMPLES = {"team": "other", "model": "gpt-4o"}


@pytest.fixture
def served(capture: Capture, keys: None) -> Iterator[tuple[str, list[Route]]]:
    config = keys_config(capture, limits={"max_json_nodes": CAP})
    config["upstreams"]["main"]["apis"] = ["chat_completions", "responses", "messages"]
    app = create_app(load_settings(None, **config))
    routes = [r for r in app.routes if isinstance(r, Route)]
    with BackgroundServer(app) as server:
        yield server.url, routes


def body_routes(routes: list[Route]) -> list[tuple[str, str]]:
    return [
        (method, path)
        for route in routes
        for method in sorted(route.methods or ())
        if method in BODY_METHODS
        for path in concrete(route.path)
    ]


def test_every_route_that_takes_a_body_is_admitted(
    served: tuple[str, list[Route]], capture: Capture
) -> None:
    import httpx

    url, routes = served
    found = body_routes(routes)
    # The fitted routes, the preview, the admin API's bodies and the forwarded paths: all here.
    paths = {p for _, p in found}
    assert {"/v1/chat/completions", "/v1/completions", "/v1/contextwarden/preview"} <= paths
    assert {"/admin/preview", "/v1/embeddings"} <= paths
    outside: list[str] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for method, path in found:
            key = ADMIN_KEY if path.startswith("/admin") else OTHER_KEY
            headers: dict[str, Any] = {"authorization": f"Bearer {key}"}
            for kind in ("strings", "numbers", "objects"):
                headers["content-type"] = "application/json"
                answer = client.request(method, path, content=over_the_cap(kind), headers=headers)
                if answer.status_code != 413:
                    outside.append(f"{method} {path} ({kind}): {answer.status_code}")
    assert outside == [], "read a body outside admission:\n" + "\n".join(outside)
    assert capture.seen == []


def test_the_preview_in_passthrough_is_admitted_too(capture: Capture, keys: None) -> None:
    """In passthrough the preview needs no credential: it is no less admitted."""
    import httpx

    config = {
        "upstreams": {"main": {"base_url": f"{capture.url}/v1"}},
        "models": {"gpt-4o": {"context_window": 8000}},
        "limits": {"max_json_nodes": CAP},
    }
    app = create_app(load_settings(None, **config))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=60) as c:
        for path in ("/v1/contextwarden/preview", "/v1/completions", "/v1/embeddings"):
            answer = c.post(path, content=over_the_cap("strings"))
            assert answer.status_code == 413, (path, answer.text)
            assert "max_json_nodes" in answer.text
    assert capture.seen == []


def test_strings_in_an_array_are_nodes() -> None:
    """R2: four million one-letter prompts were two JSON containers and passed the cap."""
    from proxy.edge.admission import json_nodes, node_bound

    body = orjson.dumps({"model": "m", "prompt": ["a"] * 5000})
    assert json_nodes(body) == 5003
    assert node_bound(body) >= json_nodes(body)
    assert json_nodes(b'{"a": [1, {"b": []}], "c": "{[{["}') == 6
    assert json_nodes(b"not json") == -1
    assert json_nodes(orjson.dumps([1] * 100), stop=10) > 10


async def test_an_aborted_upload_is_a_client_error_not_the_proxys() -> None:
    """The client hung up mid-body: a 400 of the proxy's shapes (nobody reads it), never an
    unexpected error with its traceback in the log for each one."""
    from starlette.requests import Request

    from proxy.edge.admission import read_body
    from proxy.errors import BadRequest

    messages = [
        {"type": "http.request", "body": b'{"model": "x", "mess', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
    with pytest.raises(BadRequest, match="closed the connection"):
        await read_body(Request(scope, receive), 1 << 20)
