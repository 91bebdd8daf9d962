"""What an upstream was learned to serve, beyond its config: whether it implements Responses
compaction (Codex's ``compaction_trigger``; proxy/request/compaction.py). Declared per
upstream (``responses_compaction``), or learned from the first compaction it answered with no
compaction item, and kept in the store.
"""

from __future__ import annotations

import logging

from proxy.config.catalog import Upstream
from proxy.stores.protocol import Store

log = logging.getLogger("contextwarden.compaction")

SERVED_KEY = "compaction-served\t"  # store setting: the proxy answers this upstream's compactions


class CompactionSupport:
    """The upstreams whose compactions the proxy answers, as declared or learned: a cache of
    the store's settings, read once."""

    def __init__(self) -> None:
        self._served: set[str] = set()
        self._loaded = False

    async def served(self, name: str, upstream: Upstream, store: Store) -> bool:
        if upstream.responses_compaction != "auto":
            return upstream.responses_compaction == "proxy"
        if not self._loaded:
            try:
                stored = await store.learned_windows()
            except Exception as exc:  # asked again at the next compaction
                log.warning("could not read which upstreams compact: %s", exc)
                return name in self._served
            self._served |= {k.removeprefix(SERVED_KEY) for k in stored if k.startswith(SERVED_KEY)}
            self._loaded = True
        return name in self._served

    async def learn(self, name: str, store: Store) -> None:
        self._served.add(name)
        try:
            await store.put_setting(SERVED_KEY + name, 1)
        except Exception as exc:  # kept in memory all the same
            log.warning("could not persist that %s does not compact: %s", name, exc)
