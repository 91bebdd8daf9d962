"""The long-lived objects of one running proxy, built once and passed explicitly."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from proxy.config.settings import Limits, Settings
from proxy.edge.admission import Admission
from proxy.edge.auth import Authenticator
from proxy.edge.background import Background
from proxy.edge.ownership import Owners
from proxy.formats import references
from proxy.formats.reused_items import REUSE_FROM, RecentItems
from proxy.headers import upstream_headers
from proxy.observe import otel
from proxy.observe.memory import MemoryBudget
from proxy.observe.metrics import Metrics
from proxy.providers.base import TransportName
from proxy.request import conversations
from proxy.request.conversations import PinMemory, PrefixTracker
from proxy.request.planning.planner import Planner
from proxy.request.recall import RecallMemory
from proxy.request.sticky_cuts import CutMemory
from proxy.stores import GuardedStore, StoreFault, open_store
from proxy.stores.writer import BlobWriter
from proxy.summaries import Compactor
from proxy.summaries.llm import LLMSummarizer
from proxy.summaries.seen import SeenConversations
from proxy.upstreams.aiohttp_transport import AiohttpTransport
from proxy.upstreams.capabilities import CompactionSupport
from proxy.upstreams.forwarding import Reply, Transport, decoded
from proxy.upstreams.transports import transports
from proxy.windows.advice import FirstRefusals
from proxy.windows.discovery import Discovery, Fetch
from proxy.windows.knowledge import WindowKnowledge
from proxy.windows.models import Models, build_models
from proxy.windows.tokenizers import get_encoding
from proxy.windows.truncation import RecentUsage
from strategies import error_output, ledger, standing, tokens
from strategies.checkpoints import chain

if TYPE_CHECKING:
    from proxy.observe.tracing import Telemetry

log = logging.getLogger("contextwarden")


@dataclass(kw_only=True, slots=True)
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
    # Each recent conversation's last answered read (proxy/request/lessons.py): what tells a
    # silent truncation.
    usages: RecentUsage = field(default_factory=RecentUsage)
    # The upstreams whose Responses compactions the proxy answers (proxy/request/compaction.py).
    compactions: CompactionSupport = field(default_factory=CompactionSupport)
    # The last requests' items, reused by the next ones (bodies of REUSE_FROM bytes and more).
    items: RecentItems = field(default_factory=lambda: RecentItems(min_body=REUSE_FROM))
    admission: Admission = field(default_factory=lambda: Admission(Limits()))
    # The fingerprints' and cuts' writes to the store, gathered (proxy/stores/writer.py).
    writer: BlobWriter | None = None
    memory: MemoryBudget | None = None  # what the caches may hold (proxy/observe/memory.py)
    # The models whose window was unknown and whose first refusal was told the ways out.
    told: FirstRefusals = field(default_factory=FirstRefusals)
    # Shadow mode's plans, made after their requests were answered (proxy/edge/shadow.py).
    shadows: Background = field(default_factory=Background)
    # OpenTelemetry's spans and metrics (proxy/observe/otel.py): None, the default, when off.
    telemetry: Telemetry | None = None
    # Every transport by name, ``transport`` (the HTTP one) among them: a provider names the
    # one that sends to it (proxy/providers/, proxy/upstreams/transports.py).
    transports: dict[TransportName, Transport] = field(init=False)

    def __post_init__(self) -> None:
        self.transports = transports(self.transport)

    @classmethod
    async def start(
        cls, settings: Settings, transport: Transport, telemetry: Telemetry | None = None
    ) -> Runtime:
        """``telemetry``: as given (the tests'), else as the OTEL_* variables ask."""
        telemetry = telemetry or otel.start()
        models = build_models(settings)
        # Load OpenAI's encodings now rather than on the first request (about half a second).
        await asyncio.to_thread(lambda: [get_encoding(n) for n in ("o200k_base", "cl100k_base")])
        store = open_store(settings)
        discovery = Discovery(
            models.discovered,
            fetcher(settings, transport),
            store.put_setting,
            forget=store.forget_learned,
        )
        windows = WindowKnowledge(models, store, discovery)
        metrics = Metrics(settings.models)
        llm = LLMSummarizer()
        if telemetry is not None:
            telemetry.beside(metrics)
            llm.telemetry = telemetry
        if any(p.summarize for p in settings.policies.values()):
            llm.warm()
        writer = BlobWriter(store)
        shared = settings.shared_store  # the store is the truth; memory a cache of it
        seen = SeenConversations(writer, settings.checkpoints.ttl_seconds)
        compactor = Compactor(store, llm, metrics.summarizer_latency.observe, seen)
        metrics.watch(compactor.figures)
        metrics.watch_store(lambda: store.usage)
        prefixes = PrefixTracker(writer, shared=shared)
        recalls = RecallMemory(writer, settings.checkpoints.ttl_seconds, shared)
        planner = Planner(
            settings=settings,
            compactor=compactor,
            prefixes=prefixes,
            cuts=CutMemory(writer, shared),
            recalls=recalls,
        )
        auth = Authenticator(settings)  # a key of its own until the store's is read (connect)
        gc.freeze()  # everything built so far lives as long as the process
        admission = Admission(settings.limits)
        rt = cls(
            settings=settings,
            transport=transport,
            models=models,
            store=store,
            compactor=compactor,
            planner=planner,
            auth=auth,
            metrics=metrics,
            windows=windows,
            prefixes=prefixes,
            admission=admission,
            writer=writer,
            telemetry=telemetry,
        )
        rt.memory = admission.memory = memory_budget(rt, seen)
        metrics.registry.register(rt.memory)
        llm.when_loaded(rt.memory.measure)  # litellm's tables are part of the footprint
        return rt

    async def connect(self) -> bool:
        """Read what every replica shares from the store: the key that scopes checkpoints to
        a caller, and the learned windows. Whether the store answered (proxy/edge/readiness.py
        asks again until it does; a disabled store never will, and is not waited for)."""
        if self.store.disabled:
            return True
        try:
            secret = await self.store.scope_secret()
            stored = await self.store.learned_windows()
        except StoreFault as exc:  # served meanwhile, with a key of its own
            log.warning("the checkpoint store does not answer: %s", exc)
            return False
        self.auth.scope_secret = secret
        self.windows.restore(stored)
        return True

    @property
    def owners(self) -> Owners:
        """Who made each stored response (proxy/edge/ownership.py), kept in the store."""
        return Owners(self.store)

    async def settle(self) -> None:
        """Before an answer leaves: with a store shared with other processes, the request's
        writes (its fingerprint, cut, seen mark) are in it, for its next request to find on
        whichever replica it lands (proxy/stores/writer.py)."""
        if self.writer is not None and self.settings.shared_store:
            await self.prefixes.drain()  # their writes, handed to the writer
            if self.planner.cuts is not None:
                await self.planner.cuts.drain()
            if self.planner.recalls is not None:
                await self.planner.recalls.drain()
            await self.writer.flush()

    async def stop(self) -> None:
        """Drain, then close, in this order; every step runs even when one before it failed (a
        store gone at shutdown must not leave the upstream connections open), its failure
        logged."""
        self.admission.close()
        steps: list[Callable[[], Awaitable[None]]] = [
            self.shadows.drain,  # a shadow plan writes its cut and fingerprint, and summarizes
            self.windows.discovery.drain,
            self.compactor.drain,
            self.prefixes.drain,  # a fingerprint written after the store closed is lost
        ]
        if self.planner.cuts is not None:
            steps.append(self.planner.cuts.drain)
        if self.planner.recalls is not None:
            steps.append(self.planner.recalls.drain)
        if self.writer is not None:
            steps.append(self.writer.drain)
        steps += [self.store.close, self.transport.aclose]
        if self.telemetry is not None:  # last: the spans of the drains above are exported too
            steps.append(partial(asyncio.to_thread, self.telemetry.shutdown))
        await run_each(steps)


async def run_each(steps: Sequence[Callable[[], Awaitable[None]]]) -> None:
    """Await each step in turn; one that fails is logged and the next runs all the same."""
    for step in steps:
        try:
            await step()
        except Exception:  # fault boundary: every shutdown step runs; each failure is logged
            name = getattr(step, "__qualname__", repr(step))
            log.exception("shutdown: %s failed; the steps after it run all the same", name)


def memory_budget(rt: Runtime, seen: SeenConversations) -> MemoryBudget:
    """The caches, each given its share of the memory budget (proxy/observe/memory.py)."""
    budget = MemoryBudget(rt.settings.limits.memory_budget_mb, rt.settings.caches)
    budget.add("request items", rt.items)
    budget.add("message counts", rt.planner.recent)
    budget.add(
        "message digests",
        *conversations.memories(),
        error_output.memory(),
        standing.memory(),
        *ledger.memories(),
        references.memory(),
    )
    budget.add("checkpoint chains", *chain.memories())
    budget.add("token counts", rt.models.tokenizers, tokens.digests())
    budget.add("fingerprints", rt.prefixes.memory)
    if rt.planner.cuts is not None:
        budget.add("cuts", rt.planner.cuts.memory)
    budget.add("seen conversations", seen.memory)
    budget.add("pins", rt.pins.memory)
    if rt.planner.recalls is not None:
        budget.add("recalled outputs", rt.planner.recalls)
    budget.measure()
    return budget


MAX_METADATA = 1 << 20  # bytes of a server's metadata answer read, at most


def fetcher(settings: Settings, transport: Transport) -> Fetch:
    """How window discovery asks an upstream (proxy/windows/discovery.py): through the
    transport, with the key the proxy holds for it and its configured headers (never a
    client's credential), JSON in and out; None for anything but a 200 with JSON."""

    async def fetch(name: str, method: str, url: str, body: Any) -> Any:
        upstream = settings.upstreams[name]
        headers = upstream_headers([], upstream, settings.api_key(name), forward_client_auth=False)
        headers.append(("accept", "application/json"))
        content = None
        if body is not None:
            content = orjson.dumps(body)
            headers.append(("content-type", "application/json"))
        reply = await transport.send(upstream, method, url, headers, content)
        try:
            data = reply.body if reply.body is not None else await _read(reply, MAX_METADATA)
        finally:
            await reply.aclose()
        if reply.status != 200 or data is None:
            return None
        try:
            return orjson.loads(decoded(data, reply.headers))
        except orjson.JSONDecodeError:
            return None

    return fetch


async def _read(reply: Reply, limit: int) -> bytes | None:
    chunks, size = [], 0
    if reply.stream is None:
        return None
    async for chunk in reply.stream:
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
    return b"".join(chunks)


def new_transport(max_connections: int = 1024) -> Transport:
    """The one upstream transport (proxy/upstreams/aiohttp_transport.py)."""
    return AiohttpTransport(max_connections)
