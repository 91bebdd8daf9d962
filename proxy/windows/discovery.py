"""Window discovery: a model whose window is not configured has its upstream asked for it, once
(proxy/windows/servers.py asks it with its provider's probe: each local server's module in
proxy/providers/ says what that server answers, and where).

What a server said is kept per upstream and model (``DiscoveredWindows``, read by
``Models.window_for``: a configured window wins over it, it wins over litellm's table) and in
the store, so a restarted proxy knows it before its first request. It is asked again:

- at the first use after a restart (the store's figure serves meanwhile),
- after an overflow (the server may have been restarted with a smaller context),
- after the first answer, when what it said was provisional (a model not loaded yet: the
  figure it is loaded with is the one that counts),
- in the background, at a use ``REFRESH`` seconds after it was last asked (a server restarted
  with a larger context says nothing the way a smaller one does, by an overflow),
- after ``RETRY_AFTER`` seconds when it could not be asked (a server that was down, say), and
  after ``SILENT_RETRY`` when it answered without a window (a cloud API: OpenAI's model list
  states none).

A request waits for its model's first discovery (at most ``TIMEOUT`` seconds); later ones are
made in the background.

What is kept is bounded per upstream, and the names a caller makes up cannot crowd out the
others': the servers' answers (``MAX_KNOWN`` an upstream, the least recently used dropped from
memory and the store past it) apart from the names that taught nothing (``MAX_FAILED`` an
upstream, each forgotten when it may be asked again, the oldest first past the cap). A flood
of unknown names fills only the second table; a dropped entry is asked again, never refused.

``discovery: off`` on an upstream never asks it; ``discovery: ollama``
(or ``vllm``, ``llama.cpp``, ``lmstudio``) asks only that server's endpoints.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from proxy.config.catalog import Upstream
from proxy.errors import Invariant
from proxy.providers.registry import provider_of
from proxy.stores.guarded import StoreFault
from proxy.windows.sane import sane_window
from proxy.windows.servers import Said, probe

log = logging.getLogger("contextwarden")

TIMEOUT = 5.0
REFRESH = 600.0  # a window a server stated is asked again, in the background, after this
RETRY_AFTER = 300.0  # a server that could not be asked (down, slow) is asked again after this
SILENT_RETRY = 3600.0  # one that answered without a window, after this
MAX_KNOWN = 4096  # windows kept an upstream; past it, the least recently used is dropped
MAX_FAILED = 1024  # names that taught nothing kept an upstream; past it, the oldest is dropped
STORE_KEY = "discovered\t"

# (the upstream's name, method, url, JSON body or None) -> the answer's JSON when it is a 200,
# else None
Fetch = Callable[[str, str, str, Any], Awaitable[Any]]
# (key, value) -> kept in the store with the learned windows
Persist = Callable[[str, int], Awaitable[None]]
# keys -> dropped from the store
Forget = Callable[[list[str]], Awaitable[None]]


@dataclass(kw_only=True, frozen=True, slots=True)
class Found:
    """A window a server stated, when and where."""

    window: int
    server: str
    field: str
    url: str
    at: float  # wall-clock seconds
    provisional: bool = False

    def describe(self) -> str:
        if not self.url:
            return "discovered before the proxy restarted (kept in the store)"
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.at))
        return f"discovered from {self.server} at {self.url} ({self.field}, {when})"


class DiscoveredWindows:
    """What servers said, per upstream and model: the read side, held by ``Models``. At most
    ``MAX_KNOWN`` an upstream, the least recently used dropped first."""

    def __init__(self) -> None:
        self._found: dict[str, OrderedDict[str, Found]] = {}

    def get(self, upstream: str, model: str) -> Found | None:
        kept = self._found.get(upstream)
        found = kept.get(model) if kept is not None else None
        if found is not None and kept is not None:
            kept.move_to_end(model)  # used: the last to be dropped
        return found

    def put(self, upstream: str, model: str, found: Found) -> list[str]:
        """Keep ``found``; the models dropped to make room (least recently used first)."""
        kept = self._found.setdefault(upstream, OrderedDict())
        kept[model] = found
        kept.move_to_end(model)
        dropped = []
        while len(kept) > MAX_KNOWN:
            dropped.append(kept.popitem(last=False)[0])
        return dropped

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._found.values())

    def count(self, upstream: str) -> int:
        return len(self._found.get(upstream, ()))

    def items(self) -> dict[str, dict[str, dict[str, object]]]:
        out: dict[str, dict[str, dict[str, object]]] = {}
        for upstream, kept in self._found.items():
            for model, f in kept.items():
                entry = {"window": f.window, "why": f.describe(), "provisional": f.provisional}
                out.setdefault(upstream, {})[model] = entry
        return out


class Failures:
    """The names an upstream's server taught nothing about, and when each may be asked again:
    at most ``MAX_FAILED`` an upstream, the oldest dropped first (it is only asked again)."""

    def __init__(self) -> None:
        self._until: dict[str, OrderedDict[str, float]] = {}

    def waiting(self, upstream: str, model: str, now: float) -> bool:
        """Whether ``model`` is not to be asked of ``upstream`` yet (a past entry is dropped)."""
        kept = self._until.get(upstream)
        until = kept.get(model) if kept is not None else None
        if until is None or kept is None:
            return False
        if now < until:
            return True
        del kept[model]
        return False

    def add(self, upstream: str, model: str, until: float, now: float) -> None:
        kept = self._until.setdefault(upstream, OrderedDict())
        kept.pop(model, None)
        kept[model] = until
        while kept and (len(kept) > MAX_FAILED or next(iter(kept.values())) <= now):
            kept.popitem(last=False)

    def drop(self, upstream: str, model: str) -> None:
        kept = self._until.get(upstream)
        if kept is not None:
            kept.pop(model, None)

    def count(self, upstream: str) -> int:
        return len(self._until.get(upstream, ()))


class Discovery:
    """Asks upstreams for windows (through ``fetch``), keeps what they said in ``found`` and
    (through ``persist``) in the store."""

    def __init__(
        self,
        found: DiscoveredWindows,
        fetch: Fetch,
        persist: Persist,
        clock: Callable[[], float] = time.monotonic,
        forget: Forget | None = None,
    ) -> None:
        self.found = found
        self._fetch = fetch
        self._persist = persist
        self._forget = forget
        self._clock = clock
        self.failed = Failures()  # the names that taught nothing, until asked again
        # Of the windows found, alone (a name dropped from ``found`` is dropped here too):
        self._stale: set[tuple[str, str]] = set()  # to ask again at next use
        self._asked: dict[tuple[str, str], float] = {}  # when the server was last asked
        self._flights: dict[tuple[str, str], asyncio.Task[None]] = {}
        # Told when a server's figure changed (it restarted with another context): what
        # overflows taught about the old one no longer holds.
        self.on_change: Callable[[str, str], Awaitable[None]] | None = None

    async def ensure(self, name: str, upstream: Upstream, model: str) -> bool:
        """Make sure ``model``'s window has been asked of upstream ``name``: the first time,
        the caller waits (up to ``TIMEOUT``); a refresh runs in the background. Whether the
        caller waited (what is known may have changed)."""
        if not asks(upstream):
            return False
        key = (name, model)
        known = self.found.get(name, model)
        if known is not None and self._clock() - self._asked.get(key, self._clock()) >= REFRESH:
            self._stale.add(key)
        if known is not None and key not in self._stale:
            return False
        if known is None and self.failed.waiting(name, model, self._clock()):
            return False
        flight = self._flights.get(key)
        if flight is None:
            self._stale.discard(key)
            flight = self._flights[key] = asyncio.create_task(self._ask(key, upstream))
            flight.add_done_callback(lambda _: self._flights.pop(key, None))
        if known is not None:
            return False
        await asyncio.wait([flight], timeout=TIMEOUT)
        return True

    def expire(self, name: str, model: str) -> None:
        """Ask again at the model's next use (after an overflow, an operator's reset)."""
        if self.found.get(name, model) is not None:
            self._stale.add((name, model))
        self.failed.drop(name, model)

    def answered(self, name: str, model: str) -> None:
        """A request was answered: a provisional figure (the model was not loaded) is read
        again, now that it is."""
        found = self.found.get(name, model)
        if found is not None and found.provisional:
            self._stale.add((name, model))

    def restore(self, name: str, model: str, window: int) -> None:
        """A figure the store kept: in force at once, asked again at first use (one outside the
        sane range, from before it was checked, is dropped)."""
        if sane_window(window) is None:
            return
        self._stale.add((name, model))
        self._dropped(
            name,
            self.found.put(
                name, model, Found(window=window, server="", field="", url="", at=time.time())
            ),
        )

    async def drain(self) -> None:
        for flight in list(self._flights.values()):
            flight.cancel()
        await asyncio.gather(*self._flights.values(), return_exceptions=True)

    async def _ask(self, key: tuple[str, str], upstream: Upstream) -> None:
        name, model = key
        if upstream.base_url is None:
            raise Invariant("an upstream asked for its window without a base_url")
        if self.found.get(name, model) is not None:  # answered or not: not before REFRESH
            self._asked[key] = self._clock()

        async def get(method: str, url: str, body: Any) -> Any:
            return await self._fetch(name, method, url, body)

        try:
            said = await asyncio.wait_for(
                probe(get, upstream.base_url, model, provider_of(upstream).probe), TIMEOUT
            )
        except Exception as exc:  # a server that cannot be asked is learned about otherwise
            log.info("could not discover the window of %s at %s: %r", model, name, exc)
            self._failed_until(key, RETRY_AFTER)
            return
        if said is None:  # it answered, and states no window (a cloud API): asked rarely
            self._failed_until(key, SILENT_RETRY)
            return
        await self._keep(key, said, upstream.base_url)

    async def _keep(self, key: tuple[str, str], said: Said, url: str) -> None:
        name, model = key
        before = self.found.get(name, model)
        found = Found(
            window=said.window,
            server=said.server,
            field=said.field,
            url=url,
            at=time.time(),
            provisional=said.provisional,
        )
        self._asked[key] = self._clock()
        await self._dropped_forgotten(name, self.found.put(name, model, found))
        self.failed.drop(name, model)
        if before is not None and before.window != found.window and self.on_change is not None:
            await self.on_change(name, model)
        if before is None or before.window != found.window:
            log.info("the window of %s at %s: %d, %s", model, name, found.window, found.describe())
            try:
                await self._persist(f"{STORE_KEY}{name}\t{model}", found.window)
            except StoreFault as exc:  # kept in memory all the same
                log.warning("could not persist the discovered window of %s: %s", model, exc)

    def _failed_until(self, key: tuple[str, str], wait: float) -> None:
        """``key`` taught nothing: not asked again for ``wait`` seconds (unless an overflow or
        an operator's reset expires it, or its upstream's table of failures is full)."""
        now = self._clock()
        if self.found.get(*key) is None:
            self.failed.add(*key, now + wait, now)
        else:  # a refresh that failed: the figure serves until the next refresh
            self._asked[key] = now

    def _dropped(self, name: str, models: list[str]) -> list[str]:
        """What was dropped from ``found`` is dropped from the bookkeeping too; its store keys."""
        for model in models:
            self._stale.discard((name, model))
            self._asked.pop((name, model), None)
        return [f"{STORE_KEY}{name}\t{model}" for model in models]

    async def _dropped_forgotten(self, name: str, models: list[str]) -> None:
        keys = self._dropped(name, models)
        if keys and self._forget is not None:
            try:
                await self._forget(keys)
            except StoreFault as exc:  # forgotten in memory all the same
                log.warning("could not drop discovered windows from the store: %s", exc)


# Providers' hosted APIs: ``auto`` never asks them (their models endpoints state no window, and
# each ask is a request on the operator's key); naming a kind of server still does.
HOSTED = (
    "api.openai.com", "api.anthropic.com", "api.mistral.ai", "api.groq.com", "api.deepseek.com",
    "api.together.xyz", "api.fireworks.ai", "api.x.ai", "openrouter.ai",
    "generativelanguage.googleapis.com", ".openai.azure.com",
)  # fmt: skip


def asks(upstream: Upstream) -> bool:
    """Whether discovery asks ``upstream`` for windows: one whose provider discovery asks (an
    OpenAI-compatible server) with an address, discovery not off, and under ``auto`` not a
    provider's hosted API (its models endpoint states no window)."""
    discovers = provider_of(upstream).discovers
    if upstream.discovery == "off" or not discovers or not upstream.base_url:
        return False
    return upstream.discovery != "auto" or not hosted(upstream.base_url)


def hosted(base_url: str) -> bool:
    """Whether ``base_url`` is a provider's hosted API (``HOSTED``), not a server of one's own."""
    host = (urlsplit(base_url).hostname or "").lower()
    return any(host == h or (h.startswith(".") and host.endswith(h)) for h in HOSTED)
