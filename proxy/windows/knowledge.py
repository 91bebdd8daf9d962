"""The write side of window knowledge: what moves a model's window at run time, and how it is
kept in the store.

    learn       an overflow's lesson: the window it stated (in the upstream's units) and, as
                a calibration sample, its count of the prompt beside the proxy's
    refused     an overflow without figures: the request's need is a bound on the window
    accepted    an answer: the request's need fits (proxy/windows/bounds.py)
    calibrate   an exact count of a prompt (an answer's usage, an overflow's figures)
    forget      an operator's reset: the learned window and the calibration, here and stored
    load        at start, what the store kept

Both kinds of lesson are scoped per team and model (a team's text, which it chooses, moves only
its own) and persisted in the store: a learned window under its ``team\\tmodel`` key
(proxy/windows/learned.py ``store_key``), a calibration's fit under ``calibration…\\t`` keys
(proxy/windows/calibration.py ``to_settings``), bounds under ``bounds-…\\t`` keys (the largest
prompt taken among them), and when the lesson was learned under ``learned-at\\t``. What a
process holds is read by ``Models.window_for`` (proxy/windows/models.py).
"""

from __future__ import annotations

import logging

from proxy.stores.guarded import StoreFault
from proxy.stores.protocol import Store
from proxy.windows.bounds import Bounds
from proxy.windows.calibration import (
    HIGH,
    SETTING_KEYS,
    Fit,
    Sample,
    from_settings,
    moved,
    to_settings,
)
from proxy.windows.discovery import STORE_KEY as DISCOVERED_KEY
from proxy.windows.discovery import Discovery
from proxy.windows.learned import Lesson, from_store_key, store_key
from proxy.windows.models import Models

log = logging.getLogger("contextwarden")


class WindowKnowledge:
    """What the upstreams taught about windows, held in ``models`` and kept in ``store``."""

    def __init__(self, models: Models, store: Store, discovery: Discovery) -> None:
        self.models = models
        self.store = store
        self.discovery = discovery
        discovery.on_change = self.server_changed

    async def load(self) -> None:
        """What the store kept: learned windows and calibration fits. A store outage must not
        stop the proxy: it starts with nothing learned."""
        try:
            stored = await self.store.learned_windows()
        except StoreFault as exc:  # the store is down: nothing learned yet
            log.warning("could not load learned windows: %s", exc)
            return
        self.restore(stored)

    def restore(self, stored: dict[str, int]) -> None:
        """What the store keeps (``learned_windows``): windows read from servers, learned
        windows, calibration fits and bounds."""
        stored = dict(stored)
        for key in [k for k in stored if k.startswith(DISCOVERED_KEY)]:
            upstream, _, model = key.removeprefix(DISCOVERED_KEY).partition("\t")
            self.discovery.restore(upstream, model, stored.pop(key))
        restore(self.models, stored)

    async def learn(
        self, team: str, model: str, lesson: Lesson, sample: Sample | None, estimated: bool
    ) -> None:
        """What an overflow taught, for ``team``: the window the upstream stated, in its own
        units (converted to the proxy's at use, by the calibration), and, as a calibration
        sample, its count of the prompt beside the proxy's (``sample``; for a model the proxy
        counts exactly, only when the upstream counted more: another tokenizer behind the same
        name)."""
        if self.models.learned.learn(team, model, lesson.window, evidence=lesson.evidence):
            await self.persist(team, model, lesson.window)
            await self._persist_at(team, model)
        if sample is None or not (estimated or sample.theirs > sample.ours):
            return  # an exact count that the upstream confirms, or over-counts: nothing to learn
        if sample.theirs > HIGH * sample.ours:
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
            calibration.restore(team, model, Fit(per_token=ratio, hidden=ratio))
        calibration.observe(team, model, sample)
        after = calibration.fit(team, model)
        if after is None or not moved(before, after):
            return
        try:
            for prefix, value in to_settings(after).items():
                await self.store.put_setting(prefix + store_key(team, model), value)
        except StoreFault as exc:  # kept in memory all the same
            log.warning("could not persist the calibration of %s: %s", model, exc)

    async def refused(self, team: str, model: str, need: int, sure: bool = False) -> int | None:
        """A request of ``need`` (the upstream's units: its prompt and the reply it made room
        for) refused by an overflow that states no figures: the window is below it (``sure``:
        the upstream's own figures say so). The window to retry at: the largest need the
        upstream took (None: nothing taken yet)."""
        bounds = self.models.learned.refuse(team, model, need, sure)
        if bounds is not None:
            log.info("team %s: %s for %s", team, bounds.describe(), model)
            await self._persist_bounds(team, model, bounds)
            await self._persist_at(team, model)
        current = self.models.learned.bounds(team, model)
        return current.safe() if current is not None else None

    async def accepted(self, team: str, model: str, need: int, prompt: int | None = None) -> None:
        """A request of ``need`` (``prompt`` and its reply limit) answered whole: the window
        holds it. Kept in the store once something was refused (before, it only waits for a
        first refusal)."""
        bounds = self.models.learned.accept(team, model, need, prompt)
        if bounds is not None and bounds.refused is not None:
            await self._persist_bounds(team, model, bounds)

    async def healed(self, team: str, model: str, need: int, prompt: int | None) -> bool:
        """A request let through past a lesson (a retry after a while) was answered whole:
        what it disproves is forgotten, here and in the store; whether anything was."""
        learned = self.models.learned
        if not learned.healed(team, model, need, prompt):
            return False
        log.info("team %s: a request past the learned window of %s was taken: healed", team, model)
        key = store_key(team, model)
        try:
            await self.store.forget_learned([key, *(p + key for p in (*BOUND_KEYS, AT_KEY))])
            stated = learned.stated(team, model)
            if stated is not None:
                await self.store.put_learned_window(key, stated)
        except StoreFault as exc:  # healed in memory all the same
            log.warning("could not persist the healed window of %s: %s", model, exc)
        # The healed bounds (nothing refused) stay in memory: stored again with the next
        # refusal; the keys gone, the other processes forget theirs (proxy/edge/sharing.py).
        return True

    async def _persist_at(self, team: str, model: str) -> None:
        at = self.models.learned.learned_at(team, model)
        if at is None:
            return
        try:
            await self.store.put_setting(AT_KEY + store_key(team, model), int(at))
        except StoreFault as exc:  # kept in memory all the same
            log.warning("could not persist when the window of %s was learned: %s", model, exc)

    async def _persist_bounds(self, team: str, model: str, bounds: Bounds) -> None:
        key = store_key(team, model)
        values = {
            REFUSED_KEY: bounds.refused or 0,
            ACCEPTED_KEY: bounds.accepted or 0,
            REFUSALS_KEY: bounds.refusals,
            LARGEST_KEY: bounds.largest or 0,
        }
        try:
            for prefix, value in values.items():
                await self.store.put_setting(prefix + key, value)
        except StoreFault as exc:  # kept in memory all the same
            log.warning("could not persist the window bounds of %s: %s", model, exc)

    async def forget(self, team: str, model: str) -> bool:
        """An operator's reset: the learned window, its bounds and the calibration of
        ``model`` for ``team`` are forgotten, here and in the store; whether there was any."""
        had = self.models.learned.forget(team, model)
        had = self.models.calibration.forget(team, model) or had
        for upstream in self.models.upstream_names:
            self.discovery.expire(upstream, model)  # and the server is asked again
        key = store_key(team, model)
        await self.store.forget_learned([key, *(prefix + key for prefix in PREFIXES)])
        return had

    async def server_changed(self, upstream: str, model: str) -> None:
        """The server states another window for ``model`` than before (it restarted with
        another context): the windows its overflows taught, for every team, are forgotten
        (the calibration, a matter of tokenizers, stays)."""
        teams = self.models.learned.teams_of(model)
        for team in teams:
            self.models.learned.forget(team, model)
        keys = [p + store_key(team, model) for team in teams for p in ("", *BOUND_KEYS, AT_KEY)]
        if keys:
            log.info("the server's window of %s changed: forgot what %s taught", model, teams)
            try:
                await self.store.forget_learned(keys)
            except StoreFault as exc:  # forgotten in memory all the same
                log.warning("could not forget the learned windows of %s: %s", model, exc)

    async def persist(self, team: str, model: str, window: int) -> None:
        try:
            await self.store.put_learned_window(store_key(team, model), window)
        except StoreFault as exc:  # kept in memory all the same
            log.warning("could not persist the learned window of %s: %s", model, exc)


REFUSED_KEY = "bounds-refused\t"
ACCEPTED_KEY = "bounds-accepted\t"
REFUSALS_KEY = "bounds-refusals\t"
LARGEST_KEY = "bounds-largest\t"
BOUND_KEYS = (REFUSED_KEY, ACCEPTED_KEY, REFUSALS_KEY, LARGEST_KEY)
AT_KEY = "learned-at\t"  # when the lesson in force was learned (wall-clock seconds)
PREFIXES = (*SETTING_KEYS, *BOUND_KEYS, AT_KEY)


def restore(models: Models, stored: dict[str, int]) -> None:
    """Learned windows, calibration fits and bounds, as the store keeps them."""
    grouped: dict[tuple[str, str], dict[str, int]] = {}
    for key, value in stored.items():
        prefix = next((p for p in PREFIXES if key.startswith(p)), "")
        scoped = from_store_key(key.removeprefix(prefix))
        if scoped is None:
            continue
        if prefix:
            grouped.setdefault(scoped, {})[prefix] = value
        else:
            models.learned.learn(*scoped, value, restored=True)
    for scoped, values in grouped.items():
        fit = from_settings(values)
        if fit is not None:
            models.calibration.restore(*scoped, fit)
        if values.get(REFUSED_KEY):
            accepted = values.get(ACCEPTED_KEY) or None
            refusals, largest = values.get(REFUSALS_KEY, 1), values.get(LARGEST_KEY) or None
            bounds = Bounds(
                refused=values[REFUSED_KEY], accepted=accepted, refusals=refusals, largest=largest
            )
            models.learned.restore_bounds(*scoped, bounds)
        if values.get(AT_KEY):
            models.learned.restore_at(*scoped, values[AT_KEY])
