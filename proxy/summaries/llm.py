"""The LLM behind summaries: one ``litellm.acompletion`` call with its own timeout and output cap.

litellm is imported in a worker thread on first use (the import takes seconds and would stall
the event loop).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from proxy.config.environment import prepare_environment
from proxy.config.settings import Settings
from proxy.errors import Invariant
from proxy.providers.litellm import key_header
from proxy.providers.registry import provider_of
from proxy.wire import WireRequest
from strategies.messages import Message

if TYPE_CHECKING:
    from proxy.observe.tracing import Telemetry


class SummarizerFailed(Exception):
    """The summarizer errored, timed out or answered nothing usable."""


class AllowanceSpent(SummarizerFailed):
    """The request's or the team's summarizer allowance is spent: nothing was asked of the
    summarizer, so it says nothing of the summarizer's health (no breaker counts it)."""


class SummarizerOverflow(SummarizerFailed):
    """The summarizer's own window was too small for the request (its tokenizer counts more)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Which model writes the summary, and how to reach it."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never in a log line

    @property
    def key(self) -> str:
        return f"{self.model}@{self.api_base or ''}"


def target_for(settings: Settings, req: WireRequest) -> Target:
    """Who writes a request's summaries: the policy's summarizer model if it names one (through
    its upstream, if given), else the request's own model through its own upstream.

    The key is the upstream's own; in passthrough, where the proxy holds none, the caller's,
    but only for the upstream the caller addressed and only in the header it came in (litellm
    sends an Anthropic model's key as ``x-api-key``, every other as a bearer token): a
    summarizer elsewhere spends a key of its own (``proxy/config/credentials.py`` refuses at
    start-up a config that would need the caller's there)."""
    cfg = req.policy.config.summarizer
    if cfg.model:
        if cfg.upstream is None:
            return Target(cfg.model)
        via = settings.upstreams[cfg.upstream]
        sends_as = key_header(cfg.model)
        own = settings.api_key(cfg.upstream)
        return Target(cfg.model, via.base_url, own or req.credential_for(cfg.upstream, sends_as))
    upstream = req.spec.route.upstream
    provider = provider_of(upstream)
    key = req.spec.route.key or req.credential_for(req.spec.route.name, provider.key_header)
    return Target(*provider.summarizer(upstream, req.spec.name), key)


class LLMSummarizer:
    def __init__(self) -> None:
        self._import: asyncio.Future[Any] | None = None
        self.calls = 0
        self.telemetry: Telemetry | None = None  # each call in a span, when on

    def warm(self) -> None:
        """Start importing litellm in a worker thread (it takes seconds) so that the first
        summary does not wait for it."""
        if self._import is None:
            prepare_environment()
            self._import = asyncio.ensure_future(asyncio.to_thread(_import_litellm))
            # litellm brings millions of long-lived objects: keep them out of the collector's
            # full passes, which otherwise stall requests for a hundred milliseconds and more.
            self._import.add_done_callback(lambda _: gc.freeze())

    def when_loaded(self, then: Callable[[], None]) -> None:
        """Call ``then`` once litellm's import (started by ``warm``) is done; nothing when
        none was started."""
        if self._import is not None:
            self._import.add_done_callback(lambda _: then())

    def loaded(self) -> bool:
        """Whether a summary would wait for litellm's import (started by ``warm``)."""
        return self._import is None or self._import.done()

    async def _load(self, timeout: float) -> Any:
        self.warm()
        if self._import is None:
            raise Invariant("litellm awaited before it was imported")
        done, _ = await asyncio.wait({self._import}, timeout=timeout)
        if not done:
            raise SummarizerFailed(f"litellm was still loading after {timeout}s")
        return self._import.result()

    async def complete(
        self, messages: list[Message], target: Target, max_tokens: int, timeout: float
    ) -> str:
        call = partial(self._answer, messages, target, max_tokens, timeout)
        if self.telemetry is None:
            response = await call()
        else:
            at = (target.model, target.api_base, max_tokens)
            response = await self.telemetry.summarized(call, *at)
        text = response.choices[0].message.content if response.choices else None
        if not isinstance(text, str) or not text.strip():
            raise SummarizerFailed("the summarizer returned no text")
        return text.strip()

    async def _answer(
        self, messages: list[Message], target: Target, max_tokens: int, timeout: float
    ) -> Any:
        """litellm's answer to one call, or SummarizerFailed."""
        litellm = await self._load(timeout)
        kwargs: dict[str, Any] = {"model": target.model, "messages": messages}
        kwargs.update(max_tokens=max_tokens, timeout=timeout, num_retries=0)
        if target.api_base:
            kwargs["api_base"] = target.api_base
        # litellm's OpenAI client insists on a key; local servers (Ollama, vLLM) ignore it.
        kwargs["api_key"] = target.api_key or "no-key"
        self.calls += 1
        # Not wait_for: litellm may not stop at once when cancelled, and wait_for would wait
        # for it; the request must not.
        call = asyncio.ensure_future(litellm.acompletion(**kwargs))
        done, _ = await asyncio.wait({call}, timeout=timeout)
        if not done:
            call.cancel()
            call.add_done_callback(_discard)
            raise SummarizerFailed(f"the summarizer timed out after {timeout}s")
        try:
            return call.result()
        except litellm.ContextWindowExceededError as exc:
            raise SummarizerOverflow(f"the summarizer's window overflowed: {exc}") from exc
        except Exception as exc:  # any provider error: the caller falls back to truncation
            raise SummarizerFailed(f"the summarizer failed: {exc}") from exc


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


def _import_litellm() -> Any:
    import litellm

    return litellm
