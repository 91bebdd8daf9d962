"""The long-lived objects of one running proxy, built once and passed explicitly."""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass, field

from proxy.config.environment import prepare_environment
from proxy.config.settings import Limits, Settings
from proxy.edge.admission import Admission
from proxy.edge.auth import Authenticator
from proxy.edge.ownership import Owners
from proxy.formats.recent import REUSE_FROM, RecentItems
from proxy.observe.metrics import Metrics
from proxy.request.conversations import PinMemory, PrefixTracker
from proxy.request.cuts import CutMemory
from proxy.request.plan import Planner
from proxy.request.recall import RecallMemory
from proxy.stores import GuardedStore, open_store
from proxy.stores.writer import BlobWriter
from proxy.summaries import Compactor
from proxy.summaries.llm import LLMSummarizer
from proxy.upstreams.forwarding import HttpxTransport, Transport
from proxy.windows.knowledge import WindowKnowledge
from proxy.windows.models import Models
from proxy.windows.modeltable import ModelTable
from proxy.windows.tokenizers import Tokenizers, get_encoding

log = logging.getLogger("contextwarden")


@dataclass(slots=True)
class Runtime:
    settings: Settings
    transport: Transport
    models: Models
    store: GuardedStore
    compactor: Compactor
    planner: Planner
    auth: Authenticator
    metrics: Metrics
    # What moves the models' windows at run time, kept in the store (proxy/windows/knowledge.py).
    windows: WindowKnowledge
    prefixes: PrefixTracker = field(default_factory=PrefixTracker)
    pins: PinMemory = field(default_factory=PinMemory)
    # The last requests' items, reused by the next ones (bodies of REUSE_FROM bytes and more).
    items: RecentItems = field(default_factory=lambda: RecentItems(min_body=REUSE_FROM))
    admission: Admission = field(default_factory=lambda: Admission(Limits()))
    # The fingerprints' and cuts' writes to the store, gathered (proxy/stores/writer.py).
    writer: BlobWriter | None = None

    @classmethod
    async def start(cls, settings: Settings, transport: Transport) -> Runtime:
        models = build_models(settings)
        # Load OpenAI's encodings now rather than on the first request (about half a second).
        await asyncio.to_thread(lambda: [get_encoding(n) for n in ("o200k_base", "cl100k_base")])
        store = open_store(settings)
        windows = WindowKnowledge(models, store)
        await windows.load()
        metrics = Metrics(settings.models)
        llm = LLMSummarizer()
        if any(p.summarize for p in settings.policies.values()):
            llm.warm()
        compactor = Compactor(store, llm, metrics.summarizer_latency.observe)
        metrics.watch(compactor.figures)
        writer = BlobWriter(store)
        prefixes = PrefixTracker(writer)
        recalls = RecallMemory(writer, settings.checkpoints.ttl_seconds)
        planner = Planner(settings, compactor, prefixes, CutMemory(writer), recalls)
        try:
            secret = await store.scope_secret()
        except Exception as exc:  # a per-process key: checkpoints still scoped, not shared
            log.warning("could not read the checkpoint scope key: %s", exc)
            secret = b""
        auth = Authenticator(settings, secret)
        gc.freeze()  # everything built so far lives as long as the process
        admission = Admission(settings.limits)
        return cls(
            settings, transport, models, store, compactor, planner, auth, metrics, windows,
            prefixes, admission=admission, writer=writer,
        )  # fmt: skip

    @property
    def owners(self) -> Owners:
        """Who made each stored response (proxy/edge/ownership.py), kept in the store."""
        return Owners(self.store)

    async def stop(self) -> None:
        self.admission.close()
        await self.compactor.drain()
        await self.prefixes.drain()  # a fingerprint written after the store closed is lost
        if self.planner.cuts is not None:
            await self.planner.cuts.drain()
        if self.planner.recalls is not None:
            await self.planner.recalls.drain()
        if self.writer is not None:
            await self.writer.drain()
        await self.store.close()
        await self.transport.aclose()


def build_models(settings: Settings) -> Models:
    prepare_environment()
    return Models(settings, ModelTable.bundled(), Tokenizers(settings.trimming.estimate_ratio))


def new_transport(settings: Settings, max_connections: int = 1024) -> Transport:
    if settings.upstream_client == "httpx":
        return HttpxTransport(max_connections=max_connections)
    from proxy.upstreams.aiohttp_transport import AiohttpTransport

    if settings.upstream_client == "aiohttp":
        return AiohttpTransport(max_connections)
    from proxy.upstreams.http1 import Http1Transport

    return Http1Transport(max_connections, AiohttpTransport(max_connections))
