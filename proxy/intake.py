"""From a request's bytes and headers to what the planner needs: the body validated by its wire
format, controls taken out, the format's view of the conversation, model resolved and allowed,
the team's policy (or the one the request may choose), caps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import Headers

from proxy.auth import Principal, bearer
from proxy.config import Settings
from proxy.controls import take_controls
from proxy.errors import BadRequest, Forbidden
from proxy.formats.base import View, WireFormat
from proxy.formats.chat import CHAT
from proxy.models import Models, ModelSpec, ResolvedPolicy
from proxy.pins import PinMemory, marked
from proxy.prefix import conversation_key

UNSET = View([])


@dataclass(slots=True)
class WireRequest:
    """One request as the planner sees it: validated, controls taken out, model resolved, and
    its conversation as the engine's view."""

    body: bytes
    payload: dict[str, Any]
    spec: ModelSpec
    window: int | None
    policy: ResolvedPolicy
    fmt: WireFormat = CHAT
    view: View = field(default_factory=lambda: UNSET)  # made from the payload when left unset
    team: str = "default"
    scope: str = ""  # whose checkpoints (see Principal.scope); empty: the team's
    bearer: str | None = None
    session_memory: str | None = None
    reserve_default: int | None = None  # the team's reply reserve, else trimming's
    trim: bool = True
    pinned: frozenset[int] = frozenset()  # ids of view messages the request pins
    conversation: str = ""  # its conversation's key (proxy/prefix.py), set by build_request

    def __post_init__(self) -> None:
        if self.view is UNSET:
            self.view = self.fmt.view(self.payload)


def build_request(
    body: bytes,
    headers: Headers,
    settings: Settings,
    models: Models,
    who: Principal,
    fmt: WireFormat = CHAT,
    pins: PinMemory | None = None,
) -> WireRequest:
    payload = fmt.parse(body)
    body, payload, controls = take_controls(body, payload, headers, fmt.messages_param)
    who.check_model(payload["model"])
    spec = models.resolve(payload["model"])
    if fmt.api not in spec.route.apis:
        raise BadRequest(
            f"model {payload['model']!r} is served by upstream {spec.route.name!r}, which serves "
            f"{', '.join(spec.route.apis)}, not {fmt.api}; send this request in one of those "
            "formats",
            param="model",
            code="unsupported_api",
        )
    team = who.config
    name = team.policy or spec.policy.name
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
    window = models.window(spec, who.team)
    if window is not None and team.max_context_tokens:
        window = min(window, team.max_context_tokens)
    req = WireRequest(
        body,
        payload,
        spec,
        window,
        models.policy(name),
        fmt,
        team=who.team,
        scope=who.scope,
        bearer=bearer(headers) if who.forward_client_auth else None,
        session_memory=controls.session_memory,
        reserve_default=team.reserve_output_tokens,
        trim=controls.trim,
    )
    req.conversation = conversation_key(req.scope, req.team, req.view.messages)
    pinned = marked(req.view.messages, controls.pinned)
    if pins is not None:
        pinned |= pins.pinned(req.conversation, req.view.messages, controls.pin_last)
    req.pinned = pinned
    return req
