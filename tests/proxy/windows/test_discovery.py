"""proxy/windows/discovery.py: when a server is asked for a model's window, and what is kept."""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.config.catalog import Upstream
from proxy.windows.discovery import (
    REFRESH,
    RETRY_AFTER,
    SILENT_RETRY,
    STORE_KEY,
    DiscoveredWindows,
    Discovery,
)

LOCAL = Upstream(base_url="http://local.test/v1", discovery="vllm")


class Server:
    """A vLLM's /v1/models, or one that cannot be reached (``down``) or states nothing."""

    def __init__(self, window: int | None = 8192) -> None:
        self.window = window
        self.down = False
        self.asked = 0

    async def fetch(self, name: str, method: str, url: str, body: Any) -> Any:
        self.asked += 1
        await asyncio.sleep(0)
        if self.down:
            raise ConnectionError("refused")
        card = {"id": "m", "object": "model", "owned_by": "vllm"}
        if self.window is not None:
            card["max_model_len"] = self.window
        return {"object": "list", "data": [card]}


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def discovery(server: Server, clock: Clock, kept: dict[str, int]) -> Discovery:
    async def persist(key: str, value: int) -> None:
        kept[key] = value

    return Discovery(DiscoveredWindows(), server.fetch, persist, clock)


async def test_asked_once_kept_and_asked_again_after_an_overflow() -> None:
    server, kept = Server(), dict[str, int]()
    d = discovery(server, Clock(), kept)
    assert await d.ensure("local", LOCAL, "m")  # the first request waits for it
    assert not await d.ensure("local", LOCAL, "m")
    found = d.found.get("local", "m")
    assert found is not None and found.window == 8192 and server.asked == 1
    assert kept == {f"{STORE_KEY}local\tm": 8192}
    server.window = 4096  # restarted with less
    d.expire("local", "m")  # an overflow
    assert not await d.ensure("local", LOCAL, "m")  # asked again, in the background
    await asyncio.sleep(0.01)
    assert server.asked == 2 and d.found.get("local", "m").window == 4096  # type: ignore[union-attr]
    assert kept[f"{STORE_KEY}local\tm"] == 4096


async def test_a_stated_window_is_read_again_in_the_background_after_a_while() -> None:
    """A server restarted with a larger context causes no overflow: it is read again at a use
    ``REFRESH`` seconds after the last read, without the request waiting for it."""
    server, clock, kept = Server(), Clock(), dict[str, int]()
    d = discovery(server, clock, kept)
    await d.ensure("local", LOCAL, "m")
    clock.now += REFRESH - 1
    server.window = 32768  # restarted with more
    assert not await d.ensure("local", LOCAL, "m")
    await asyncio.sleep(0.01)
    assert server.asked == 1
    clock.now += 1
    assert not await d.ensure("local", LOCAL, "m")  # no wait: 8192 serves meanwhile
    await asyncio.sleep(0.01)
    assert server.asked == 2 and d.found.get("local", "m").window == 32768  # type: ignore[union-attr]
    assert kept[f"{STORE_KEY}local\tm"] == 32768
    server.down = True
    clock.now += REFRESH
    for _ in range(3):  # a server down at the refresh is not asked at every use
        assert not await d.ensure("local", LOCAL, "m")
        await asyncio.sleep(0.01)
    assert server.asked == 3 and d.found.get("local", "m").window == 32768  # type: ignore[union-attr]


async def test_concurrent_first_requests_ask_once() -> None:
    server = Server()
    d = discovery(server, Clock(), {})
    await asyncio.gather(*(d.ensure("local", LOCAL, "m") for _ in range(5)))
    assert server.asked == 1


async def test_a_server_that_cannot_be_asked_is_asked_again_later() -> None:
    server, clock = Server(), Clock()
    server.down = True
    d = discovery(server, clock, {})
    await d.ensure("local", LOCAL, "m")
    await d.ensure("local", LOCAL, "m")
    assert server.asked == 1 and d.found.get("local", "m") is None
    server.down = False
    clock.now += RETRY_AFTER
    await d.ensure("local", LOCAL, "m")
    assert server.asked == 2 and d.found.get("local", "m") is not None


async def test_a_server_that_states_nothing_is_asked_rarely() -> None:
    server, clock = Server(window=None), Clock()
    d = discovery(server, clock, {})
    await d.ensure("local", LOCAL, "m")
    clock.now += RETRY_AFTER
    await d.ensure("local", LOCAL, "m")
    assert server.asked == 1
    clock.now += SILENT_RETRY
    await d.ensure("local", LOCAL, "m")
    assert server.asked == 2


async def test_a_restored_figure_serves_at_once_and_is_asked_again() -> None:
    server = Server(window=16384)
    d = discovery(server, Clock(), {})
    d.restore("local", "m", 8192)
    assert d.found.get("local", "m").window == 8192  # type: ignore[union-attr]
    assert "before the proxy restarted" in d.found.get("local", "m").describe()  # type: ignore[union-attr]
    assert not await d.ensure("local", LOCAL, "m")  # no wait: in force already
    await asyncio.sleep(0.01)
    assert d.found.get("local", "m").window == 16384  # type: ignore[union-attr]


async def test_off_and_other_providers_are_never_asked() -> None:
    server = Server()
    d = discovery(server, Clock(), {})
    await d.ensure("local", Upstream(base_url="http://x/v1", discovery="off"), "m")
    await d.ensure("a", Upstream(provider="anthropic", base_url="http://x/v1"), "m")
    assert server.asked == 0


class Settings:
    """The store's settings, as the learned windows keep them."""

    def __init__(self) -> None:
        self.kept: dict[str, int] = {}

    async def put_setting(self, key: str, value: int) -> None:
        self.kept[key] = value

    async def put_learned_window(self, key: str, value: int) -> None:
        self.kept[key] = min(value, self.kept.get(key, value))

    async def forget_learned(self, keys: list[str]) -> None:
        for key in keys:
            self.kept.pop(key, None)

    async def learned_windows(self) -> dict[str, int]:
        return dict(self.kept)


async def test_a_server_restarted_with_another_context_drops_what_its_overflows_taught() -> None:
    from proxy.config.settings import load_settings
    from proxy.windows.knowledge import WindowKnowledge
    from proxy.windows.learned import Lesson
    from proxy.windows.models import build_models

    models = build_models(load_settings(None, upstreams={"local": {"base_url": "http://l/v1"}}))
    store, server = Settings(), Server(window=8192)
    found = Discovery(models.discovered, server.fetch, store.put_setting, Clock())
    knowledge = WindowKnowledge(models, store, found)  # type: ignore[arg-type]
    await found.ensure("local", LOCAL, "m")
    for team in ("a", "b"):
        await knowledge.learn(team, "m", Lesson(6000, None, "stated"), None, False)
        await knowledge.refused(team, "m", 7000)
    assert models.learned.stated("a", "m") == 6000 and models.learned.bounds("b", "m")
    server.window = 32768  # restarted with more
    found.expire("local", "m")
    await found.ensure("local", LOCAL, "m")
    await asyncio.sleep(0.01)
    assert models.learned.teams_of("m") == []
    assert [k for k in store.kept if not k.startswith(STORE_KEY)] == []
    assert models.window(models.resolve("m"), "a") == 32768


def test_auto_leaves_providers_hosted_apis_alone() -> None:
    from proxy.windows.discovery import hosted

    assert hosted("https://api.openai.com/v1")
    assert hosted("https://my-deployment.openai.azure.com/openai")
    assert not hosted("http://localhost:11434/v1")
    assert not hosted("http://gpu-box.internal:8000/v1")
    assert not hosted("https://api.openai.com.evil.example/v1")
