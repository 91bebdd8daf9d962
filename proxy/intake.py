"""From a request's bytes and headers to what the planner needs: validated body, controls taken
out, model resolved and allowed, the team's policy (or the one the request may choose), caps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers

from proxy.auth import Principal, bearer
from proxy.config import Settings
from proxy.controls import take_controls
from proxy.errors import BadRequest, Forbidden
from proxy.models import Models, ModelSpec, ResolvedPolicy
from proxy.validation import parse_chat


@dataclass(slots=True)
class ChatRequest:
    """One chat request as the planner sees it: validated, controls taken out, model resolved."""

    body: bytes
    payload: dict[str, Any]
    spec: ModelSpec
    window: int | None
    policy: ResolvedPolicy
    team: str = "default"
    scope: str = ""  # whose checkpoints (see Principal.scope); empty: the team's
    bearer: str | None = None
    session_memory: str | None = None
    reserve_default: int | None = None  # the team's reply reserve, else trimming's
    trim: bool = True


def build_request(
    body: bytes, headers: Headers, settings: Settings, models: Models, who: Principal
) -> ChatRequest:
    payload = parse_chat(body)
    body, payload, controls = take_controls(body, payload, headers)
    who.check_model(payload["model"])
    spec = models.resolve(payload["model"])
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
    return ChatRequest(
        body,
        payload,
        spec,
        window,
        models.policy(name),
        team=who.team,
        scope=who.scope,
        bearer=bearer(headers) if who.forward_client_auth else None,
        session_memory=controls.session_memory,
        reserve_default=team.reserve_output_tokens,
        trim=controls.trim,
    )
