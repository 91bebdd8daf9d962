"""What one request's outcome teaches about its model's window, handed to the window knowledge
(proxy/windows/knowledge.py), which keeps it per team and model:

    stated     an overflow that states the window: learned, its count a calibration sample
    refused    an overflow that states no figures: the request's need bounds the window
    answered   an answer: its usage a calibration sample, and the request's need fits; or,
               when its usage shows the upstream read less than it was sent (Ollama truncates
               at ``num_ctx`` without a word), a silent refusal: what it read fits, what was
               sent does not

A request's *need* is what the window had to hold for it, in the upstream's units: its prompt
and the reply limit it sent (none: none). An upstream that checks the prompt and the limit
against its window (Anthropic, vLLM) refuses a need over it, one that checks the prompt alone
(llama.cpp, Ollama, OpenAI's Responses) refuses a prompt over it; either way a refused need is
over the window, and the budget keeps the next requests' needs under the window it learned (a
reply limit is lowered into what is left, proxy/request/budget.py). A refused need is counted
by the proxy (converted by the calibration); an answered one is the upstream's own count when
its usage states it, else the proxy's, when that count can be trusted (an exact tokenizer, or a
calibrated estimate).

A request that holds content the proxy cannot count (a file by id or URL, a PDF:
proxy/formats/references.py) teaches nothing from the proxy's count of it: its figure-free
refusal bounds nothing (the proxy's count would set the window far below the real one, for the
whole team), and its counts calibrate nothing; the upstream's own figures (a stated window, a
usage's prompt count taken as a need the window holds) still teach.

A request let through past a lesson (``trial``: proxy/edge/relearning.py) that is answered
whole heals what it disproves.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

from proxy.errors import Invariant
from proxy.formats.references import holds_references
from proxy.request.conversations import key_of
from proxy.request.fitting import Fitting
from proxy.request.planning.off_loop import off_loop, work_of
from proxy.request.planning.plan import Plan
from proxy.windows.calibration import LOW as CALIBRATION_LOW
from proxy.windows.calibration import Sample
from proxy.windows.learned import Lesson
from proxy.windows.truncation import short_of_growth, short_of_text
from proxy.wire import WireRequest

if TYPE_CHECKING:
    from proxy.observe.metrics import Metrics
    from proxy.windows.knowledge import WindowKnowledge
    from proxy.windows.models import Models
    from proxy.windows.truncation import RecentUsage

UNBOUNDED = 2**31  # the window a request whose window was unknown is counted against
UNKNOWN = "unknown-window"
LOWERED = "max-tokens-lowered "


log = logging.getLogger("contextwarden")


@dataclass(frozen=True, slots=True, kw_only=True)
class Teachers:
    """Where a request's lessons go, and what they read: the window knowledge (kept in the
    store), the models' windows and calibrations, the conversations' last reads, the metrics."""

    windows: WindowKnowledge
    models: Models
    usages: RecentUsage
    metrics: Metrics


class Lessons:
    """One request's lessons, for its team (in passthrough, its caller: ``learns_as``) and
    model."""

    def __init__(
        self,
        to: Teachers,
        req: WireRequest,
        fitting: Fitting,
        cap: int | None,
        trial: bool = False,
    ) -> None:
        self.to, self.req, self.fitting, self.cap = to, req, fitting, cap
        self.learner = req.learns_as or req.team
        self.trial = trial  # let through past a learned window
        self._uncountable: bool | None = None

    async def uncountable(self) -> bool:
        """Whether the request holds content the proxy cannot count (read once; a large
        body's scan, four passes over its bytes, off the event loop)."""
        if self._uncountable is None:
            req = self.req
            self._uncountable = await off_loop(
                work_of(req), holds_references, req.body, req.payload
            )
        return self._uncountable

    async def stated(self, lesson: Lesson, plan: Plan) -> int | None:
        """An overflow that states the window; the window now in force (the proxy's count)."""
        req = self.req
        self._overflowed()
        theirs = None if await self.uncountable() else lesson.theirs  # else its count is no sample
        sample = self.fitting.sample(theirs, plan) if theirs else None
        estimated = not req.spec.pricing.exact
        await self.to.windows.learn(self.learner, req.spec.name, lesson, sample, estimated)
        return self.to.models.window(req.spec, self.learner, self.cap)

    async def refused(self, plan: Plan, unknown: bool) -> tuple[int, int] | None:
        """An overflow that states no figures: the window to retry at and the size refused,
        in the proxy's count (None: shrink by the settings' share). The window is the largest
        need the upstream took, else half of what it refused: a window nothing states may be
        anywhere below (``unknown``: the request's window was unknown; a table's window may be
        as far off)."""
        req = self.req
        self._overflowed()
        if not self.fitting.conversation or plan.budget is None or plan.tokens_after is None:
            return None
        if await self.uncountable():
            log.info(
                "team %s: a figure-free overflow of %s holds content the proxy cannot count "
                "(a file, a document): no window is learned from it", req.team, req.spec.name,
            )  # fmt: skip
            return None
        need = self.need(plan, self._predicted(plan))
        safe = await self.to.windows.refused(self.learner, req.spec.name, need)
        if safe is None:
            safe = need // 2
        converted = partial(self.to.models.converted, self.learner, req.spec.name, cap=self.cap)
        return converted(safe), converted(need)

    async def answered(self, plan: Plan, theirs: int | None) -> str | None:
        """A 200 answer to ``plan``; ``theirs``: the upstream's count of its prompt, when its
        usage states it. The count is a calibration sample (and a drift figure), and the
        request's need is taken whole; unless the count shows the upstream read less than it
        was sent (``read_short``): it truncated the prompt silently, and what it read is what
        its window holds. Then what it read and what was sent, for a header."""
        req, to = self.req, self.to
        to.windows.discovery.answered(req.spec.route.name, req.spec.name)
        count = plan.counted_prompt
        if theirs and count is None and UNKNOWN in plan.actions and self.fitting.conversation:
            # Sent whole, uncounted: counted now, so that a silent truncation shows.
            plan = replace(plan, tokens_after=self.fitting.recount())
            count = plan.tokens_after
        # A count the proxy could not make whole is no sample (nor, beside the next one's, a
        # sign of a silent truncation).
        if theirs and count and not await self.uncountable():
            sample = self._sample(plan, theirs, count)
            if sample is not None:
                before = to.usages.swap(key_of(req), sample)
                if self._read_short(plan, sample, before):
                    to.usages.swap(key_of(req), before)  # the last whole read stays
                    sent = self._predicted(plan)
                    await self._truncated(plan, sent, sample.theirs)
                    return f"{sample.theirs} of {sent}"
            to.metrics.usage_drift.labels(to.metrics.model_label(req.spec.name)).observe(
                theirs / count
            )
            if sample is not None and not req.spec.pricing.exact:  # a full sample: below
                await to.windows.calibrate(self.learner, req.spec.name, sample)
        if not self.fitting.conversation:
            return None  # a batch's usage sums prompts each fitted on its own
        prompt = theirs if theirs else self._trusted(plan, count)
        if prompt:
            await to.windows.accepted(self.learner, req.spec.name, self.need(plan, prompt), prompt)
        taken = prompt or (self._predicted(plan) if plan.budget is not None else None)
        if self.trial and taken:
            await to.windows.healed(self.learner, req.spec.name, self.need(plan, taken), taken)
        return None

    def _sample(self, plan: Plan, theirs: int, count: int) -> Sample | None:
        """``theirs`` beside the proxy's count of what ``plan`` forwarded. For an estimated
        model, the full sample (what the view hides apart: a calibration sample); for an exact
        one, the quick one (its count whole, hidden tokens in it), told apart only when it
        looks short (``_read_short``): pricing what a view hides takes a walk over it."""
        if not self.req.spec.pricing.exact:
            return self.fitting.sample(theirs, plan)
        forwarded = plan.fit.messages if plan.fit is not None else self.req.view.messages
        return Sample(theirs=theirs, ours=count, hidden=0, messages=len(forwarded))

    def _read_short(self, plan: Plan, sample: Sample, before: Sample | None) -> bool:
        """Whether the upstream read less than it was sent (proxy/windows/truncation.py)."""
        if short_of_growth(sample, CALIBRATION_LOW, before):
            return True
        if not short_of_text(sample, CALIBRATION_LOW):
            return False
        if sample.hidden or not self.req.spec.pricing.exact:
            return True
        full = self.fitting.sample(sample.theirs, plan)  # the quick one counted hidden tokens
        return full is not None and short_of_text(full, CALIBRATION_LOW)

    async def _truncated(self, plan: Plan, sent: int, read: int) -> None:
        """The upstream read ``read`` tokens of the ``sent`` it was sent: the window holds the
        first and not the second (proxy/windows/bounds.py), and the next requests are fitted
        to it."""
        req, to = self.req, self.to
        self._overflowed()
        to.metrics.truncations.labels(req.team, to.metrics.model_label(req.spec.name)).inc()
        log.warning(
            "team %s: the upstream read %d of the %d prompt tokens it was sent for %s: it "
            "truncated the prompt; the window is learned from its usage",
            req.team, read, sent, req.spec.name,
        )  # fmt: skip
        if self.fitting.conversation:  # the upstream's own figures: sure, whatever it took
            await to.windows.refused(self.learner, req.spec.name, self.need(plan, sent), True)
            await to.windows.accepted(self.learner, req.spec.name, self.need(plan, read), read)

    def _overflowed(self) -> None:
        """A window the server stated may have changed since (a restart with less): asked
        again at the model's next use."""
        spec = self.req.spec
        if not spec.configured:
            self.to.windows.discovery.expire(spec.route.name, spec.name)

    def need(self, plan: Plan, prompt: int) -> int:
        """``prompt`` (the upstream's units) and the reply limit ``plan`` sent."""
        return prompt + (forwarded_output(self.req, plan) or 0)

    def _trusted(self, plan: Plan, count: int | None) -> int | None:
        """The proxy's own count in the upstream's units, when it can stand for theirs."""
        req = self.req
        if count is None:
            return None
        calibrated = self.to.models.calibration.fit(self.learner, req.spec.name) is not None
        return self._predicted(plan) if req.spec.pricing.exact or calibrated else None

    def _predicted(self, plan: Plan) -> int:
        """The upstream's count of what ``plan`` forwarded, as the calibration predicts it
        from the proxy's (its fixed cost, hidden tokens and messages weighed in)."""
        req = self.req
        if self.to.models.calibration.fit(self.learner, req.spec.name) is None and plan.prompts:
            return plan.prompts[1]  # no fit: the proxy's own count, as it stands
        sample = self.fitting.sample(0, plan)
        if sample is None:
            if plan.tokens_after is None:
                raise Invariant("a sent plan is counted")
            return math.ceil(plan.tokens_after * req.units)
        return self.to.models.calibration.predict(self.learner, req.spec.name, sample)


def forwarded_output(req: WireRequest, plan: Plan) -> int | None:
    """The reply limit ``plan`` sent: the request's own, or what the planner lowered it to."""
    for action in plan.actions:
        if action.startswith(LOWERED):
            return int(action.rsplit("->", 1)[1])
    return req.fmt.requested_output(req.payload)
