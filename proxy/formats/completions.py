"""``POST /v1/completions``: a prompt (or a batch of them) fitted to the window.

An adapter on the one request path (proxy/edge/exchange.py), like the other formats: the
edge, the window, fallbacks, the overflow retry, the headers and the metrics are the path's.
What is the format's own is how prompts are cut (proxy/request/fitting.py runs it), since a
prompt is not a conversation and the engine never sees it.

The budget (fitting.py) is ``window - max_tokens (16 when absent, as the API does) - safety
margin`` for each prompt of the batch (each is completed on its own). A prompt over it is cut
at token boundaries by the policy's ``completions`` choice (middle_out, keep_tail or reject),
with a marker where text was removed; token-id prompts are cut as ids. A request that fits
goes as its original bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.errors import BadRequest, ContextTooLarge
from proxy.formats.base import View, parse_json, usage_int
from proxy.formats.chat import CHAT
from proxy.formats.reused_items import Reuse
from proxy.windows.models import ModelSpec
from proxy.windows.tokenizers import encoder, get_encoding
from strategies.budget import Budget
from strategies.errors import DoesNotFit
from strategies.messages import Message
from strategies.prompt_cut import BYTES, MARKER, Codec, PromptCut, cut_text, cut_tokens

DEFAULT_MAX_TOKENS = 16  # the API's own default for /v1/completions


def codec_for(spec: ModelSpec) -> Codec:
    """The model's tokenizer as the cut needs it: bytes, an exact encoding, or cl100k scaled
    to an estimate (whose token ids are not the model's)."""
    name = spec.pricing.tokenizer
    if name == "bytes":
        return BYTES
    encoding = "cl100k_base" if name == "estimate" else name
    ratio = spec.pricing.tokens_per_byte if name == "estimate" else 1.0
    enc = get_encoding(encoding)
    return Codec.of(encoder(encoding), enc.decode_bytes, ratio, name != "estimate")


class CompletionsFormat:
    """The legacy completions body. Its prompts are no conversation: the view is empty, and
    :class:`Prompts` cuts them instead of the engine."""

    name = "completions"
    api = "chat_completions"  # served where chat is: an OpenAI-compatible upstream
    path = "completions"
    messages_param = "prompt"

    def parse(self, body: bytes, reuse: Reuse | None = None) -> dict[str, Any]:
        return _parse(body)

    def view(self, payload: dict[str, Any], reuse: Reuse | None = None) -> View:
        return View(messages=[])

    def requested_output(self, payload: dict[str, Any]) -> int | None:
        asked = payload.get("max_tokens")
        return asked if isinstance(asked, int) and asked > 0 else None

    def with_output(self, payload: dict[str, Any], limit: int) -> dict[str, Any]:
        return {**payload, "max_tokens": limit}

    def stateful(self, payload: dict[str, Any]) -> bool:
        return False

    def write(self, payload: dict[str, Any], view: View, kept: list[Message]) -> dict[str, Any]:
        if kept:
            raise TypeError("a completions prompt is cut by Prompts, not the engine")
        return payload  # its empty view, kept empty

    def prompt_usage(self, usage: dict[str, Any]) -> int | None:
        return usage_int(usage, "prompt_tokens")

    def stream_error(self, message: str) -> bytes:
        return CHAT.stream_error(message)  # the same SSE stream of chunks


COMPLETIONS = CompletionsFormat()


@dataclass(kw_only=True, frozen=True, slots=True)
class Cut:
    """A request's prompts as cut for one budget: the body to send (the original bytes when
    nothing was cut), the largest prompt's tokens before and after, and how it was counted."""

    body: bytes
    before: int
    after: int
    actions: list[str]
    counted: str  # "exact", or "estimate" for a model the proxy only estimates


class Prompts:
    """One request's prompts, and how to cut them for a budget (the first try and retries)."""

    def __init__(self, body: bytes, payload: dict[str, Any], codec: Codec, how: PromptCut) -> None:
        self.body, self.payload, self.codec, self.how = body, payload, codec, how
        prompt = payload["prompt"]
        self.batch = isinstance(prompt, list) and bool(prompt) and not isinstance(prompt[0], int)

    def cut(self, budget: Budget) -> Cut:
        """The body to send for ``budget`` and its figures; ContextTooLarge when the policy
        rejects a prompt over it."""
        limit = math.floor(budget.messages / self.codec.ratio)
        prompt, batch = self.payload["prompt"], self.batch
        try:
            pieces = [self._cut(p, limit) for p in (prompt if batch else [prompt])]
        except DoesNotFit as exc:
            raise ContextTooLarge(
                f"the prompt needs {math.ceil(exc.tokens * self.codec.ratio)} tokens but only "
                f"{budget.messages} are left ({budget.explain()}), and this policy does not cut "
                "prompts (completions: reject)",
                param="prompt",
            ) from None
        before = max(math.ceil(b * self.codec.ratio) for _, b, _ in pieces)
        after = max(math.ceil(a * self.codec.ratio) for _, _, a in pieces)
        counted = "exact" if self.codec.ratio == 1.0 else "estimate"
        if all(b == a for _, b, a in pieces):
            return Cut(body=self.body, before=before, after=after, actions=[], counted=counted)
        cut = [p for p, _, _ in pieces]
        body = orjson.dumps({**self.payload, "prompt": cut if batch else cut[0]})
        return Cut(
            body=body, before=before, after=after, actions=[f"prompt_{self.how}"], counted=counted
        )

    def _cut(self, prompt: Any, limit: int) -> tuple[Any, int, int]:
        if isinstance(prompt, str):
            return cut_text(prompt, limit, self.how, self.codec.encode, self.codec.decode)
        marker = self.codec.encode(MARKER) if self.codec.ids_are_the_models else []
        ids = cut_tokens(prompt, limit, self.how, marker)
        return ids, len(prompt), len(ids)


def _parse(body: bytes) -> dict[str, Any]:
    payload = parse_json(body)
    if not isinstance(payload.get("model"), str) or not payload["model"]:
        raise BadRequest("'model' is required and must be a non-empty string", param="model")
    prompt = payload.get("prompt")
    if not _is_prompt(prompt):
        raise BadRequest(
            "'prompt' must be a string, an array of strings, an array of token ids, or an "
            "array of arrays of token ids",
            param="prompt",
        )
    asked = payload.get("max_tokens")
    if asked is not None and (isinstance(asked, bool) or not isinstance(asked, int) or asked < 0):
        raise BadRequest("'max_tokens' must be a non-negative integer", param="max_tokens")
    return payload


def _is_prompt(prompt: Any) -> bool:
    def ids(value: Any) -> bool:
        return isinstance(value, list) and all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
        )

    if isinstance(prompt, str) or ids(prompt):
        return True
    return isinstance(prompt, list) and all(isinstance(p, str) or ids(p) for p in prompt)
