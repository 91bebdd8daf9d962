"""``POST /v1/completions``: a prompt (or a batch of them) fitted to the window.

The budget is ``window - max_tokens (16 when absent, as the API does) - safety margin`` for
each prompt of the batch (each is completed on its own). A prompt over it is cut at token
boundaries by the policy's ``completions`` choice (middle_out, keep_tail or reject), with a
marker where text was removed; token-id prompts are cut as ids. A request that fits goes as
its original bytes. Overflow recovery is chat's loop; the headers are chat's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.edge.auth import Principal
from proxy.edge.errors import BadRequest, ContextTooLarge, ProxyError
from proxy.edge.headers import cw_headers, decode_headers, refused_headers, upstream_headers
from proxy.edge.intake import allowed_controls, read_body, take_controls
from proxy.edge.runtime import Runtime
from proxy.formats.base import parse_json
from proxy.observe.metrics import Outcome
from proxy.overflow.retry import Lesson, Retrying, send_with_overflow_retry
from proxy.request.budget import checked
from proxy.request.plan import Plan
from proxy.upstreams.forwarding import Reply, join_url, respond
from proxy.windows.calibration import Sample
from proxy.windows.models import ModelSpec
from proxy.windows.tokenizers import encoder, get_encoding
from strategies.budget import Budget
from strategies.errors import DoesNotFit
from strategies.prompt_cut import MARKER, PromptCut, cut_text, cut_tokens

DEFAULT_MAX_TOKENS = 16  # the API's own default for /v1/completions


@dataclass(frozen=True, slots=True)
class Codec:
    """A model's tokenizer as the cut needs it: encode, decode, and how many of our tokens one
    of the model's is worth (above 1 for an estimate)."""

    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    ratio: float
    ids_are_the_models: bool  # token-id prompts can carry our marker


def codec_for(spec: ModelSpec) -> Codec:
    name = spec.pricing.tokenizer
    if name == "bytes":
        return Codec(lambda t: list(t.encode()), _utf8, 1.0, False)
    encoding = "cl100k_base" if name == "estimate" else name
    enc = get_encoding(encoding)
    ratio = spec.pricing.tokens_per_byte if name == "estimate" else 1.0
    return Codec(
        encoder(encoding),
        lambda ids: enc.decode_bytes(ids).decode("utf-8", "ignore"),
        ratio,
        name != "estimate",
    )


def _utf8(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", "ignore")


async def handle_completions(request: Request, rt: Runtime) -> Response:
    started = time.perf_counter()
    who = rt.auth.team(request.headers)
    model, status, plan, retries, stream = "-", 0, None, 0, False
    try:
        body = await read_body(request, rt.settings.limits.max_body_bytes)
        await rt.admission.check(body)
        # The proxy's own controls never reach the upstream (which would reject the field).
        payload = await rt.admission.run(body, _parse, body)
        body, payload, controls = take_controls(body, payload, request.headers)
        model, stream = payload["model"], payload.get("stream") is True
        who.check_model(model)
        spec = rt.models.resolve(model)
        chosen = allowed_controls(controls, who, rt.settings, who.config.policy or spec.policy.name)
        if controls.session_memory:
            raise BadRequest(
                "session memory is a chat conversation's summary; /v1/completions has none",
                param="contextwarden.session_memory",
            )
        upstream = spec.route.upstream
        if upstream.provider != "openai" or upstream.base_url is None:
            raise BadRequest("/v1/completions is only served by an OpenAI-compatible upstream")
        window = rt.models.window(spec, who.team)
        if window is not None and who.config.max_context_tokens:
            window = min(window, who.config.max_context_tokens)
        how: PromptCut = rt.models.policy(chosen).config.completions
        fitting = Fitting(body, payload, codec_for(spec), how)
        margin = rt.settings.trimming.safety_margin_tokens
        if not controls.trim:
            plan = Plan(body, None, actions=["trimming-disabled"], counted="none")
        elif window:
            plan = fitting.plan(budget_for(payload, window, margin))
        else:
            plan = _unknown(body)
        reply, plan, retries = await send_with_overflow_retry(
            plan, _retrying(request, rt, who, spec, fitting, margin), rt.settings.trimming
        )
        status = reply.status
        return respond(reply, cw_headers(plan, retries))
    except ProxyError as exc:
        status = exc.status
        exc.headers = refused_headers(exc)
        raise
    finally:
        outcome = Outcome(
            who.team, model, status, plan.tokens_before if plan else None,
            plan.tokens_after if plan else None, plan.actions if plan else [], retries, None,
            time.perf_counter() - started, 0.0, stream, path="completions", format="completions",
        )  # fmt: skip
        rt.metrics.record(outcome)


def budget_for(payload: dict[str, Any], window: int, margin: int) -> Budget:
    """Each prompt's budget: the window less the completion it asks for and the margin."""
    asked = payload.get("max_tokens")
    reserve = asked if isinstance(asked, int) and asked > 0 else DEFAULT_MAX_TOKENS
    return checked(Budget(window, reserve, 0, margin))


class Fitting:
    """One request's prompts, and how to cut them for a budget (the first try and retries)."""

    def __init__(self, body: bytes, payload: dict[str, Any], codec: Codec, how: PromptCut) -> None:
        self.body, self.payload, self.codec, self.how = body, payload, codec, how

    def plan(self, budget: Budget) -> Plan:
        limit = math.floor(budget.messages / self.codec.ratio)
        prompt = self.payload["prompt"]
        batch = isinstance(prompt, list) and bool(prompt) and not isinstance(prompt[0], int)
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
            return Plan(self.body, budget, before, after, [], counted)
        cut = [p for p, _, _ in pieces]
        body = orjson.dumps({**self.payload, "prompt": cut if batch else cut[0]})
        return Plan(body, budget, before, after, [f"prompt_{self.how}"], counted)

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


def _unknown(body: bytes) -> Plan:
    return Plan(body, None, actions=["unknown-window"], counted="none")


def _retrying(
    request: Request, rt: Runtime, who: Principal, spec: ModelSpec, fitting: Fitting, margin: int
) -> Retrying:
    upstream = spec.route.upstream
    assert upstream.base_url is not None
    key = spec.route.key
    headers = upstream_headers(
        decode_headers(request.headers.raw), upstream, key, who.forward_client_auth
    )
    url = join_url(upstream.base_url, "completions", request.url.query)

    async def send(plan: Plan) -> Reply:
        return await rt.transport.send(upstream, "POST", url, headers, plan.body)

    async def refit(budget: Budget) -> Plan:
        return fitting.plan(budget)

    async def learn(lesson: Lesson, plan: Plan) -> None:
        sent = plan.tokens_after
        sample = Sample(lesson.theirs, sent) if lesson.theirs and sent else None
        await rt.learn_window(who.team, spec.name, lesson, sample, not spec.pricing.exact)

    return Retrying(
        send=send,
        refit=refit,
        budget_for=lambda window: budget_for(fitting.payload, window, margin),
        learn=learn,
        recount=lambda: fitting.plan(budget_for(fitting.payload, 10**9, margin)).tokens_after or 0,
    )
