"""What an answer says of itself, in the names of OpenTelemetry's GenAI semantic conventions:
the model that answered and its usage (input and output tokens, cache reads and writes), read
from a body or from a stream's events, in any of the four wire formats. Pure: no OpenTelemetry
import (proxy/observe/tracing.py sets them on spans).

The usage keys tell the shape: ``prompt_tokens``/``completion_tokens`` (chat, legacy completions;
cache reads in ``prompt_tokens_details.cached_tokens``), ``input_tokens`` with
``input_tokens_details`` (Responses), ``input_tokens`` with ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` beside it (Anthropic Messages, whose ``input_tokens`` leaves the
cached ones out: the conventions' input count includes them, so they are added).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.config.catalog import Upstream
from proxy.providers.registry import provider_of

INPUT = "gen_ai.usage.input_tokens"
OUTPUT = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
RESPONSE_MODEL = "gen_ai.response.model"

# gen_ai.operation.name by wire format: the legacy completions are text completions.
OPERATIONS = {"completions": "text_completion"}


def operation(fmt: str) -> str:
    return OPERATIONS.get(fmt, "chat")


def provider(upstream: Upstream) -> str:
    """gen_ai.provider.name: the upstream's API (openai, anthropic), or for litellm the
    provider its model string names (``bedrock/...``: bedrock)."""
    return provider_of(upstream).telemetry_name(upstream)


@dataclass(slots=True)
class Answered:
    """The model that answered and the usage an answer states, each None when it does not."""

    model: str | None = None
    usage: dict[str, Any] | None = None  # the upstream's own usage object, merged over events

    def attributes(self) -> dict[str, str | int]:
        out: dict[str, str | int] = {}
        if self.model:
            out[RESPONSE_MODEL] = self.model
        if self.usage is not None:
            out.update(usage_attributes(self.usage))
        return out

    def see(self, data: Any) -> None:
        """One JSON answer or event: its model and usage (a later one's keys win: Anthropic's
        ``message_delta`` carries the final output count after ``message_start``'s)."""
        if not isinstance(data, dict):
            return
        holder = data
        for key in ("response", "message"):  # Responses' events, Anthropic's message_start
            if isinstance(data.get(key), dict):
                holder = data[key]
        model = holder.get("model")
        if isinstance(model, str) and model:
            self.model = model
        usage = holder.get("usage")
        if not isinstance(usage, dict):
            usage = data.get("usage")  # Anthropic's message_delta: beside, not in, a message
        if isinstance(usage, dict):
            self.usage = {**(self.usage or {}), **usage}


def answered_body(body: bytes) -> Answered:
    """What a JSON answer read whole says (nothing for another body)."""
    found = Answered()
    with suppress(orjson.JSONDecodeError):
        found.see(orjson.loads(body))
    return found


def answered_events(parts: Iterable[bytes]) -> Answered:
    """What a stream's server-sent events say, from the parts of it kept (its head and its
    tail, in order); a line cut at a part's edge is skipped."""
    found = Answered()
    for part in parts:
        for line in part.split(b"\n"):
            if not line.startswith(b"data:") or (b'"usage"' not in line and b'"model"' not in line):
                continue
            try:
                found.see(orjson.loads(line[5:].strip()))
            except orjson.JSONDecodeError:
                continue
    return found


def usage_attributes(usage: dict[str, Any]) -> dict[str, str | int]:
    """The conventions' usage attributes of an upstream's usage object, in any format."""
    out: dict[str, str | int] = {}
    if "prompt_tokens" in usage or "completion_tokens" in usage:  # chat, legacy completions
        details = usage.get("prompt_tokens_details")
        read = _count(details, "cached_tokens") if isinstance(details, dict) else None
        _put(out, INPUT, _count(usage, "prompt_tokens"))
        _put(out, OUTPUT, _count(usage, "completion_tokens"))
        if read is None:  # an Anthropic model's answer through an OpenAI-compatible gateway
            read = _count(usage, "cache_read_input_tokens")
        _put(out, CACHE_READ, read)
        _put(out, CACHE_CREATION, _count(usage, "cache_creation_input_tokens"))
        return out
    details = usage.get("input_tokens_details")
    if isinstance(details, dict):  # Responses: input_tokens counts the cached ones
        _put(out, INPUT, _count(usage, "input_tokens"))
        _put(out, CACHE_READ, _count(details, "cached_tokens"))
    else:  # Anthropic: input_tokens is what was neither read from nor written to the cache
        read = _count(usage, "cache_read_input_tokens")
        created = _count(usage, "cache_creation_input_tokens")
        fresh = _count(usage, "input_tokens")
        if fresh is not None:
            _put(out, INPUT, fresh + (read or 0) + (created or 0))
        _put(out, CACHE_READ, read)
        _put(out, CACHE_CREATION, created)
    _put(out, OUTPUT, _count(usage, "output_tokens"))
    return out


def _count(holder: dict[str, Any], key: str) -> int | None:
    value = holder.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _put(out: dict[str, str | int], key: str, value: int | None) -> None:
    if value is not None:
        out[key] = value
