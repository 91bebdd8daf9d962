"""From a request's bytes and headers to what the planner needs: the body validated by its wire
format, controls taken out, the format's view of the conversation, model resolved and allowed,
the team's policy (or the one the request may choose), caps, pinned messages.

**Controls** a client may send: the ``contextwarden`` body object and ``x-contextwarden-*``
headers. The body object is always stripped before forwarding (the upstream would reject it);
then the body is re-serialized, every other field kept as it was. A message (or Responses input
item) may carry its own ``"contextwarden": {"pin": true}``: stripped too, and the message is
pinned (kept verbatim: never dropped, trimmed or summarized), like the messages the policy's
``pin:`` rules match and the ones ``x-contextwarden-pin-last`` pinned
(proxy/request/conversations.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import orjson
from starlette.datastructures import Headers

from proxy.config.settings import Settings
from proxy.edge.auth import Principal, caller_credential
from proxy.errors import BadRequest, Forbidden
from proxy.formats.anthropic_compaction import asked as anthropic_asked
from proxy.formats.anthropic_compaction import expanded as anthropic_expanded
from proxy.formats.anthropic_edits import FIELD, json_tokens, serve, strip
from proxy.formats.base import CompactionAsk, WireFormat
from proxy.formats.chat import CHAT
from proxy.formats.compaction import expand
from proxy.formats.responses_context import FIELD as RESPONSES_FIELD
from proxy.formats.responses_context import asked
from proxy.formats.reused_items import RecentItems, Reuse
from proxy.headers import PIN_LAST, POLICY, SESSION_MEMORY, text_header
from proxy.request.conversations import PinMemory, conversation_key
from proxy.windows.models import Models, ModelSpec
from proxy.wire import WireRequest
from strategies.client_summaries import asks_compaction
from strategies.messages import SOURCE, Message


def build_request(
    body: bytes,
    headers: Headers,
    settings: Settings,
    models: Models,
    who: Principal,
    fmt: WireFormat = CHAT,
    pins: PinMemory | None = None,
    recent: RecentItems | None = None,
) -> WireRequest:
    """``recent``: the conversations' last requests, whose items this one reuses where it
    sends them again (proxy/formats/reused_items.py)."""
    intake = read_request(body, headers, settings, models, who, fmt, recent)
    return made_request(intake, headers, models, who, pins)


@dataclass(kw_only=True, slots=True)
class Intake:
    """A request read and checked (``read_request``): what deciding whether, where and how it
    is forwarded needs. The rest of a ``WireRequest`` (its view, window, conversation, pins:
    what only its plan needs) is ``made_request``'s."""

    body: bytes  # as forwarded: the client's, less the proxy's own controls
    payload: dict[str, Any]
    fmt: WireFormat
    spec: ModelSpec
    policy: str  # the policy it runs under
    controls: Controls
    reuse: Reuse | None
    edits: list[dict[str, Any]] | None = None
    compaction: CompactionAsk | None = None


def read_request(
    body: bytes,
    headers: Headers,
    settings: Settings,
    models: Models,
    who: Principal,
    fmt: WireFormat = CHAT,
    recent: RecentItems | None = None,
) -> Intake:
    """The body validated by its wire format (every 400 the request can get from its body),
    its controls taken out and allowed, its model resolved and allowed to the team, its hosted
    tools and paid options too, its route serving its format, and what the proxy takes out of
    it for its upstream: all a request is refused for, before anything is forwarded."""
    if fmt.api == "responses":  # the proxy's own compaction items, as the upstream reads them
        body = expand(body)
    reuse = (
        recent.begin(fmt.name, who.scope)
        if recent is not None and len(body) >= recent.min_body
        else None
    )
    payload = fmt.parse(body, reuse)
    known = reuse.known if reuse is not None else 0
    body, payload, controls = take_controls(body, payload, headers, fmt.messages_param, known)
    who.check_model(payload["model"])
    who.check_spend(payload)
    spec = models.resolve(payload["model"])
    if fmt.api not in spec.route.apis:
        raise BadRequest(
            f"model {payload['model']!r} is served by upstream {spec.route.name!r}, which serves "
            f"{', '.join(spec.route.apis)}, not {fmt.api}; send this request in one of those "
            "formats",
            param="model",
            code="unsupported_api",
        )
    edits, compaction = None, None
    served = spec.route.upstream.context_edits
    if fmt.api == "messages" and served != "forward" and COMPACTION_BYTES in body:
        # Anthropic's compaction, which such an upstream does not know: its blocks read as
        # the API reads them, what is asked served (or, stripped, left out).
        payload, ask = anthropic_asked(anthropic_expanded(payload))
        compaction = ask if served == "serve" else None
        body = orjson.dumps(payload)
    if fmt.api == "messages" and FIELD in payload and served != "forward":
        payload, edits = context_edits(payload, spec)
        body = orjson.dumps(payload)
    if fmt.api == "responses" and RESPONSES_FIELD in payload:
        served = spec.route.upstream.responses_context
        if served != "forward":
            payload, asked_at = asked(payload)
            if served == "serve" and asked_at is not None:
                compaction = CompactionAsk(at=asked_at)
            body = orjson.dumps(payload)
    name = allowed_controls(controls, who, settings, who.config.policy or spec.policy.name)
    return Intake(
        body=body,
        payload=payload,
        fmt=fmt,
        spec=spec,
        policy=name,
        controls=controls,
        reuse=reuse,
        edits=edits,
        compaction=compaction,
    )


def made_request(
    intake: Intake,
    headers: Headers,
    models: Models,
    who: Principal,
    pins: PinMemory | None = None,
) -> WireRequest:
    """The request its plan needs, from what ``read_request`` read: the format's view of the
    conversation, the window, the calibration, its conversation and pinned messages."""
    body, payload, spec, controls, reuse = (
        intake.body, intake.payload, intake.spec, intake.controls, intake.reuse
    )  # fmt: skip
    fmt, team, learner = intake.fmt, who.config, who.learns_as
    window = models.window(spec, learner, team.max_context_tokens)
    req = WireRequest(
        body=body,
        payload=payload,
        spec=spec,
        window=window,
        policy=models.policy(intake.policy),
        fmt=fmt,
        view=fmt.view(payload, reuse),
        team=who.team,
        scope=who.scope,
        credential=caller_credential(headers) if who.forward_client_auth else None,
        addressed=spec.route.name,
        session_memory=controls.session_memory,
        reserve_default=team.reserve_output_tokens,
        cap=team.max_context_tokens,
        trim=controls.trim,
        learns_as=learner,
        units=models.calibration.ratio(learner, spec.name) or 1.0,
        calibrated=models.calibration.ratio(learner, spec.name) is not None,
        hidden_weight=models.calibration.hidden_weight(learner, spec.name),
        message_weight=models.calibration.message_weight(learner, spec.name),
        alone=who.alone,
        sampled=not spec.pricing.exact and models.calibration.wants(learner, spec.name),
        reused=reuse.known_bytes if reuse is not None else 0,
        context_edits=intake.edits,
        compaction=intake.compaction,
    )
    if reuse is not None:
        reuse.commit(len(body))
    req.conversation = conversation_key(req.scope, req.team, req.view.messages)
    req.client_compaction = asks_compaction(req.view.messages)
    pinned = marked(req.view.messages, controls.pinned) | req.view.pinned
    if pins is not None:
        pinned |= pins.pinned(req.conversation, req.view.messages, controls.pin_last)
    req.pinned = pinned
    return req


COMPACTION_BYTES = b'"compact'  # the edit, the parameter and the blocks: read only when there


def context_edits(
    payload: dict[str, Any], spec: ModelSpec
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """A Messages body without its ``context_management``, stripped or served as its upstream
    takes it (proxy/formats/anthropic_edits.py), and what the edits did (None: stripped)."""
    if spec.route.upstream.context_edits == "strip":
        return strip(payload), None
    counter = spec.pricing.counter
    return serve(payload, json_tokens(lambda text: counter.message({"content": text})))


def allowed_controls(controls: Controls, who: Principal, settings: Settings, name: str) -> str:
    """The policy the request runs under (``name``, or the one it chose), once the team is
    allowed every control the request sent; 400 or 403 otherwise."""
    team = who.config
    if controls.policy is not None and controls.policy != name:
        if controls.policy not in settings.policies:
            raise BadRequest(f"unknown policy {controls.policy!r}", param="contextwarden.policy")
        if controls.policy not in team.allowed_policies:
            raise Forbidden(
                f"team {who.team!r} may not choose policy {controls.policy!r}",
                code="policy_not_allowed",
            )
        name = controls.policy
    if controls.session_memory and not team.allow_session_memory:
        raise Forbidden(
            f"team {who.team!r} may not send session memory (allow_session_memory)",
            code="session_memory_not_allowed",
        )
    if not controls.trim and not team.allow_disable_trimming:
        raise Forbidden(f"team {who.team!r} may not turn trimming off", code="trim_not_allowed")
    return name


KNOWN = frozenset({"session_memory", "policy", "trim"})


@dataclass(kw_only=True, frozen=True, slots=True)
class Controls:
    session_memory: str | None = None
    policy: str | None = None
    trim: bool = True
    pinned: frozenset[int] = frozenset()  # ids of the (stripped) messages marked to pin
    pin_last: bool = False  # x-contextwarden-pin-last: pin the newest user message


def take_pins(
    payload: dict[str, Any], key: str, known: int = 0
) -> tuple[dict[str, Any], frozenset[int], bool]:
    """``payload`` without the per-message ``contextwarden`` markers under ``key``, the ids of
    the messages that asked to be pinned, and whether any marker was there. The first
    ``known`` messages are the conversation's last request's objects
    (proxy/formats/reused_items.py), which never hold a marker: only the others are looked at
    for one."""
    messages = payload.get(key)
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and "contextwarden" in m for m in islice(messages, known, None)
    ):
        return payload, frozenset(), False
    out: list[Any] = []
    pinned: set[int] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "contextwarden" not in m:
            out.append(m)
            continue
        marker = m["contextwarden"]
        if (
            not isinstance(marker, dict)
            or set(marker) - {"pin"}
            or not isinstance(marker.get("pin", False), bool)
        ):
            where = f"{key}[{i}].contextwarden"
            raise BadRequest(
                f'\'{where}\' must be {{"pin": true}} or {{"pin": false}}', param=where
            )
        clean = {k: v for k, v in m.items() if k != "contextwarden"}
        if marker.get("pin"):
            pinned.add(id(clean))
        out.append(clean)
    return {**payload, key: out}, frozenset(pinned), True


def take_controls(
    body: bytes,
    payload: dict[str, Any],
    headers: Headers,
    messages_key: str = "messages",
    known: int = 0,
) -> tuple[bytes, dict[str, Any], Controls]:
    """The body and payload to forward, without the ``contextwarden`` object or message
    markers, and the controls (``known``: see ``take_pins``)."""
    memory = text_header(headers.raw, SESSION_MEMORY)
    policy = text_header(headers.raw, POLICY)
    pin_last = (text_header(headers.raw, PIN_LAST) or "").strip().lower() in ("1", "true")
    payload, pinned, marked = take_pins(payload, messages_key, known)
    if "contextwarden" not in payload:
        body = orjson.dumps(payload) if marked else body
        return (
            body,
            payload,
            Controls(
                session_memory=memory or None,
                policy=policy or None,
                trim=True,
                pinned=pinned,
                pin_last=pin_last,
            ),
        )
    raw = payload["contextwarden"]
    if not isinstance(raw, dict):
        raise BadRequest("'contextwarden' must be an object", param="contextwarden")
    unknown = sorted(set(raw) - KNOWN)
    if unknown:
        raise BadRequest(
            f"unknown contextwarden option(s): {', '.join(unknown)}", param="contextwarden"
        )
    value = raw.get("session_memory", memory)
    chosen = raw.get("policy", policy)
    trim = raw.get("trim", True)
    if value is not None and not isinstance(value, str):
        raise BadRequest("'contextwarden.session_memory' must be a string", param="contextwarden")
    if chosen is not None and not isinstance(chosen, str):
        raise BadRequest("'contextwarden.policy' must be a string", param="contextwarden")
    if not isinstance(trim, bool):
        raise BadRequest("'contextwarden.trim' must be a boolean", param="contextwarden")
    rest = {k: v for k, v in payload.items() if k != "contextwarden"}
    controls = Controls(
        session_memory=value or None,
        policy=chosen or None,
        trim=trim,
        pinned=pinned,
        pin_last=pin_last,
    )
    return orjson.dumps(rest), rest, controls


def marked(messages: Sequence[Message], objects: frozenset[int]) -> frozenset[int]:
    """Ids of the view messages made from the wire messages or items in ``objects`` (by id):
    the message itself (chat), or one of its source items (Responses, Anthropic)."""
    if not objects:
        return frozenset()
    out = set()
    for m in messages:
        if id(m) in objects or any(id(o) in objects for o in _sources(m)):
            out.add(id(m))
    return frozenset(out)


def _sources(m: Message) -> list[object]:
    src = m.get(SOURCE)
    if isinstance(src, list):
        return list(src)
    if isinstance(src, dict):
        return [src.get("m")]
    return []
