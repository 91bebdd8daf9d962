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
from proxy.overflow.retry import Lesson
from proxy.request.conversations import PinMemory, PrefixTracker
from proxy.request.cuts import CutMemory
from proxy.request.plan import Planner
from proxy.request.recall import RecallMemory
from proxy.stores import GuardedStore, open_store
from proxy.stores.writer import BlobWriter
from proxy.summaries import Compactor
from proxy.summaries.llm import LLMSummarizer
from proxy.upstreams.forwarding import HttpxTransport, Transport
from proxy.windows.advice import FirstRefusals
from proxy.windows.calibration import HIGH as CALIBRATION_HIGH
from proxy.windows.calibration import SETTING_KEYS, Fit, Sample, from_settings, moved, to_settings
from proxy.windows.models import Models, from_store_key, store_key
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
    prefixes: PrefixTracker = field(default_factory=PrefixTracker)
    pins: PinMemory = field(default_factory=PinMemory)
    # The last requests' items, reused by the next ones (bodies of REUSE_FROM bytes and more).
    items: RecentItems = field(default_factory=lambda: RecentItems(min_body=REUSE_FROM))
    admission: Admission = field(default_factory=lambda: Admission(Limits()))
    # The fingerprints' and cuts' writes to the store, gathered (proxy/stores/writer.py).
    writer: BlobWriter | None = None
    # The models whose window was unknown and whose first refusal was told the ways out.
    told: FirstRefusals = field(default_factory=FirstRefusals)

    @classmethod
    async def start(cls, settings: Settings, transport: Transport) -> Runtime:
        models = build_models(settings)
        # Load OpenAI's encodings now rather than on the first request (about half a second).
        await asyncio.to_thread(lambda: [get_encoding(n) for n in ("o200k_base", "cl100k_base")])
        store = open_store(settings)
        try:
            restore(models, await store.learned_windows())
        except Exception as exc:  # a store outage must not stop the proxy
            log.warning("could not load learned windows: %s", exc)
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
            settings, transport, models, store, compactor, planner, auth, metrics, prefixes,
            admission=admission, writer=writer,
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

    async def learn_window(
        self, team: str, model: str, lesson: Lesson, sample: Sample | None, estimated: bool
    ) -> None:
        """What an overflow taught, for ``team``: the window the upstream stated, in its own
        units (converted to the proxy's at use, by the calibration), and, as a calibration
        sample, its count of the prompt beside the proxy's (``sample``; for a model the proxy
        counts exactly, only when the upstream counted more: another tokenizer behind the same
        name)."""
        if self.models.learned.learn(team, model, lesson.window, evidence=lesson.evidence):
            await self.persist_window(team, model, lesson.window)
        if sample is None or not (estimated or sample.theirs > sample.ours):
            return  # an exact count that the upstream confirms, or over-counts: nothing to learn
        if sample.theirs > CALIBRATION_HIGH * sample.ours:
            # More than the clamp: a count so far from the proxy's says more about the request's
            # text (a client skewing it) than about the tokenizer. The window itself is learned.
            log.warning(
                "team %s: the upstream counted %.1fx the proxy's count for %s; not calibrated",
                team, sample.theirs / sample.ours, model,
            )  # fmt: skip
            return
        await self.calibrate(team, model, sample, exact=True)

    async def calibrate(self, team: str, model: str, sample: Sample, exact: bool = False) -> None:
        """One exact count of a prompt (an answer's usage, an overflow's figures), as a
        calibration sample; the fit is persisted (with the learned windows) when it moves.
        ``exact``: stated in an overflow error, which applies on its own as a plain ratio
        while no fit is in force."""
        calibration = self.models.calibration
        before = calibration.fit(team, model)
        if exact and before is None:
            ratio = sample.theirs / sample.ours
            calibration.restore(team, model, Fit(ratio, ratio))
        calibration.observe(team, model, sample)
        after = calibration.fit(team, model)
        if after is None or not moved(before, after):
            return
        try:
            for prefix, value in to_settings(after).items():
                await self.store.put_setting(prefix + store_key(team, model), value)
        except Exception as exc:  # kept in memory all the same
            log.warning("could not persist the calibration of %s: %s", model, exc)

    async def forget_window(self, team: str, model: str) -> bool:
        """An operator's reset: the learned window (applied or pending) and the calibration of
        ``model`` for ``team`` are forgotten, here and in the store; whether there was any."""
        had = self.models.learned.forget(team, model)
        had = self.models.calibration.forget(team, model) or had
        key = store_key(team, model)
        await self.store.forget_learned([key, *(prefix + key for prefix in SETTING_KEYS)])
        return had

    async def persist_window(self, team: str, model: str, window: int) -> None:
        try:
            await self.store.put_learned_window(store_key(team, model), window)
        except Exception as exc:  # kept in memory all the same
            log.warning("could not persist the learned window of %s: %s", model, exc)


def restore(models: Models, stored: dict[str, int]) -> None:
    """Learned windows and calibration fits, as the store keeps them."""
    fits: dict[tuple[str, str], dict[str, int]] = {}
    for key, value in stored.items():
        prefix = next((p for p in SETTING_KEYS if key.startswith(p)), "")
        scoped = from_store_key(key.removeprefix(prefix))
        if scoped is None:
            continue
        if prefix:
            fits.setdefault(scoped, {})[prefix] = value
        else:
            models.learned.learn(*scoped, value)
    for scoped, values in fits.items():
        fit = from_settings(values)
        if fit is not None:
            models.calibration.restore(*scoped, fit)


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
