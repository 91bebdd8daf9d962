"""Attacks against a real proxy on a loopback port, in front of capture upstreams that record
every path, header and body they receive, so a test can assert what never reached them."""

from __future__ import annotations

import http.client
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.conftest import assert_no_plan_fallbacks

UPSTREAM_KEY = "sk-operator-secret-0000"
TEAM_KEY = "cw-team-key-1111"
OTHER_KEY = "cw-other-key-2222"
ADMIN_KEY = "cw-admin-key-3333"
SUMMARY_KEY = "sk-summary-own-6666"  # held by the summarizer's upstream (test_credential_flow)
BIG_KEY = "sk-big-own-7777"  # held by a fallback model's upstream
CHAT_OK = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


@dataclass
class Seen:
    method: str
    raw_path: bytes
    headers: dict[str, str]
    body: bytes
    query: bytes = b""


@dataclass
class Capture:
    """A loopback upstream that answers 200 to anything and remembers what it was sent."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    # What to answer, from what was received; None: CHAT_OK. A test sets it to script errors.
    answer: Callable[[Seen], Response] | None = None

    def app(self) -> Starlette:
        async def anything(request: Request) -> Response:
            body = await request.body()
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers.raw}
            path, query = request.scope["raw_path"], request.scope["query_string"]
            seen = Seen(request.method, path, headers, body, query)
            self.seen.append(seen)
            if self.answer is not None:
                return self.answer(seen)
            return Response(orjson.dumps(CHAT_OK), media_type="application/json")

        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(routes=[Route("/{path:path}", anything, methods=methods)])

    @property
    def paths(self) -> list[bytes]:
        return [s.raw_path for s in self.seen]


@dataclass
class Proxy:
    url: str
    settings: dict[str, Any]

    def raw(self, method: str, path: str, headers: dict[str, str] | None = None,
            body: bytes | None = None) -> tuple[int, bytes]:  # fmt: skip
        """A request with the path sent exactly as written (no client-side normalising)."""
        host, port = self.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


ProxyFactory = Callable[..., Proxy]


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSTREAM_KEY", UPSTREAM_KEY)
    monkeypatch.setenv("TEAM_KEY", TEAM_KEY)
    monkeypatch.setenv("OTHER_KEY", OTHER_KEY)
    monkeypatch.setenv("ADMIN_KEY", ADMIN_KEY)


def serving() -> Iterator[Capture]:
    cap = Capture()
    with BackgroundServer(cap.app()) as server:
        cap.url = server.url
        yield cap


@pytest.fixture
def capture() -> Iterator[Capture]:
    yield from serving()


@pytest.fixture
def attacker() -> Iterator[Capture]:
    """Where an attack would like the operator's key to go."""
    yield from serving()


@pytest.fixture
def summary() -> Iterator[Capture]:
    """A policy's summarizer upstream."""
    yield from serving()


@pytest.fixture
def big() -> Iterator[Capture]:
    """A fallback model's upstream."""
    yield from serving()


@pytest.fixture
def own_keys(monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    """The summarizer's and the fallback's upstreams hold keys of their own."""
    monkeypatch.setenv("SUMMARY_KEY", SUMMARY_KEY)
    monkeypatch.setenv("BIG_KEY", BIG_KEY)


@pytest.fixture
def make_proxy(tmp_path: Path, keys: None) -> Iterator[ProxyFactory]:
    with ExitStack() as stack:

        def build(**settings: Any) -> Proxy:
            settings.setdefault("data_dir", str(tmp_path / "data"))
            app = create_app(load_settings(None, **settings))
            apps.append(app)
            server = stack.enter_context(BackgroundServer(app))
            return Proxy(server.url, settings)

        apps: list[Any] = []
        yield build
        for app in apps:
            assert_no_plan_fallbacks(app)


def keys_config(capture: Capture, **extra: Any) -> dict[str, Any]:
    """keys mode: team ``limited`` may use gpt-4o only; team ``other`` any model."""
    return {
        "upstreams": {"main": {"base_url": f"{capture.url}/v1", "api_key_env": "UPSTREAM_KEY"}},
        "default_upstream": "main",
        "models": {"gpt-4o": {"context_window": 8000}, "gpt-4o-mini": {"context_window": 8000}},
        "auth": "keys",
        "admin_key_env": "ADMIN_KEY",
        "teams": {
            "limited": {"key_envs": ["TEAM_KEY"], "models": ["gpt-4o"]},
            "other": {"key_envs": ["OTHER_KEY"]},
        },
        "policies": {"default": {"summarize": False}},
        **extra,
    }


def chat_body(model: str = "gpt-4o", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}
