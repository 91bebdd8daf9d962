"""Who is calling (proxy/edge/auth.py): a team from a contextwarden key or a passthrough header,
the caller a credential makes, and what a team may use and spend."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from proxy.config.settings import Settings, load_settings
from proxy.edge.auth import (
    Authenticator,
    Principal,
    caller_identity,
    hosted_tool,
    paid_options,
)
from proxy.errors import Forbidden, Unauthorized


def keys_mode(monkeypatch: pytest.MonkeyPatch, **extra: Any) -> Settings:
    monkeypatch.setenv("CW_KEY_RED", "cw-red-key")
    monkeypatch.setenv("CW_KEY_BLUE", "cw-blue-key")
    teams = {"red": {"key_envs": ["CW_KEY_RED"]}, "blue": {"key_envs": ["CW_KEY_BLUE"]}}
    return load_settings(None, auth="keys", teams=teams, **extra)


def passthrough() -> Settings:
    teams = {"default": {}, "limited": {"models": ["gpt-4o", "claude-*"]}}
    return load_settings(None, auth="passthrough", teams=teams)


def principal(**team: Any) -> Principal:
    settings = load_settings(None, teams={"t": team})
    return Principal(team="t", config=settings.teams["t"], forward_client_auth=True)


def test_a_key_names_its_team_in_either_header(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = Authenticator(keys_mode(monkeypatch))
    red = auth.team(Headers({"authorization": "Bearer cw-red-key"}))
    blue = auth.team(Headers({"x-api-key": "cw-blue-key"}))  # Claude Code's header
    assert (red.team, blue.team) == ("red", "blue")
    assert not red.forward_client_auth  # the client's key never goes upstream in keys mode
    assert red.caller is not None and "cw-red-key" not in red.caller  # a digest, not the key
    assert red.caller != blue.caller


def test_a_missing_or_wrong_key_is_a_401(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = Authenticator(keys_mode(monkeypatch))
    for headers in [
        {}, {"authorization": "Bearer cw-red-keyx"}, {"authorization": "Basic cw-red-key"},
        {"authorization": "Bearer "}, {"x-api-key": "cw-red-ke"},
    ]:  # fmt: skip
        with pytest.raises(Unauthorized):
            auth.team(Headers(headers))


def test_passthrough_takes_the_team_from_its_header_or_the_default() -> None:
    auth = Authenticator(passthrough())
    assert auth.team(Headers({})).team == "default"
    chosen = auth.team(Headers({"x-contextwarden-team": "limited"}))
    assert chosen.team == "limited" and chosen.forward_client_auth
    with pytest.raises(Unauthorized) as refused:
        auth.team(Headers({"x-contextwarden-team": "nobody"}))
    assert refused.value.code == "unknown_team"


def test_passthrough_callers_are_told_apart_by_credential_and_scoped_by_it() -> None:
    auth = Authenticator(passthrough(), scope_secret=b"s" * 32)
    one = auth.team(Headers({"authorization": "Bearer sk-one"}))
    again = auth.team(Headers({"authorization": "Bearer sk-one"}))
    other = auth.team(Headers({"authorization": "Bearer sk-two"}))
    assert one.caller == again.caller != other.caller
    assert one.scope == f"default~{one.caller}" != other.scope
    assert one.learns_as == one.scope  # a passthrough caller teaches only itself
    assert one.alone == ""
    # No credential: the team's one caller, but each request its own recall name.
    bare, bare_again = auth.team(Headers({})), auth.team(Headers({}))
    assert bare.caller is None and bare.scope == "default"
    assert bare.alone and bare.alone != bare_again.alone


def test_a_credential_in_the_query_makes_a_caller_too() -> None:
    auth = Authenticator(passthrough())
    assert auth.team(Headers({}), "key=g-1").caller != auth.team(Headers({}), "key=g-2").caller
    assert auth.team(Headers({}), "alt=json").caller is None  # not named like a credential


def test_in_keys_mode_a_team_learns_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    red = Authenticator(keys_mode(monkeypatch)).team(
        Headers({"authorization": "Bearer cw-red-key"})
    )
    assert red.scope != "red" and red.learns_as == "red"


def test_a_limited_team_may_use_its_models_and_families_only() -> None:
    who = principal(models=["gpt-4o", "claude-*"])
    assert who.allows("gpt-4o") and who.allows("claude-sonnet-4")
    assert not who.allows("gpt-4o-mini")
    with pytest.raises(Forbidden) as refused:
        who.check_model("o3")
    assert refused.value.param == "model"
    assert principal().allows("anything")


def test_hosted_tools_and_paid_options_need_listing_on_a_limited_team() -> None:
    limited = principal(models=["gpt-4o"])
    limited.check_spend({"tools": [{"type": "function", "function": {"name": "f"}}], "n": 1})
    refused_bodies: list[tuple[dict[str, Any], str]] = [
        ({"tools": [{"type": "web_search_preview"}]}, "tool_not_allowed"),
        ({"web_search_options": {}}, "tool_not_allowed"),
        ({"service_tier": "priority"}, "option_not_allowed"),
        ({"n": 2}, "option_not_allowed"),
    ]
    for body, code in refused_bodies:
        with pytest.raises(Forbidden) as refused:
            limited.check_spend(body)
        assert refused.value.code == code, body
    principal().check_spend({"tools": [{"type": "web_search"}], "n": 4, "background": True})
    listed = principal(models=["gpt-4o"], hosted_tools=["image_generation"], paid_options=["n"])
    listed.check_spend({"tools": [{"type": "image_generation", "model": "gpt-4o"}], "n": 3})
    with pytest.raises(Forbidden, match="gpt-image-1"):  # a hosted tool's own billed model
        listed.check_spend({"tools": [{"type": "image_generation", "model": "gpt-image-1"}]})


def test_hosted_tool_names_lose_their_versions_and_client_tools_are_none() -> None:
    assert hosted_tool({"type": "web_search_20250305"}) == "web_search"
    assert hosted_tool({"type": "web_search_preview_2025_03_11"}) == "web_search"
    assert hosted_tool({"type": "code_interpreter"}) == "code_interpreter"
    for client_side in ["function", "bash_20250124", "text_editor_20250728", "apply_patch"]:
        assert hosted_tool({"type": client_side}) == ""
    assert hosted_tool("web_search") == hosted_tool({"type": 3}) == ""


def test_paid_options_count_every_multiplier_but_one() -> None:
    assert paid_options({"n": 1, "best_of": None, "service_tier": "default"}) == []
    assert paid_options({"n": "128", "best_of": 2.0}) == [("n", "n"), ("best_of", "best_of")]
    assert paid_options(
        {"service_tier": "flex", "speed": "fast", "inference_geo": "us", "background": True}
    ) == [("background", "background"), ("fast", "speed"), ("inference_geo", "inference_geo")]
    assert paid_options({"service_tier": "scale", "inference_geo": "global"}) == [
        ("priority", "service_tier")
    ]


def test_admin_and_metrics_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = Authenticator(keys_mode(monkeypatch))
    with pytest.raises(Forbidden):
        closed.admin(Headers({"authorization": "Bearer cw-red-key"}))
    with pytest.raises(Forbidden):
        closed.metrics(Headers({}))
    Authenticator(passthrough()).metrics(Headers({}))  # open in passthrough with no key set
    monkeypatch.setenv("CW_ADMIN", "cw-admin")
    auth = Authenticator(keys_mode(monkeypatch, admin_key_env="CW_ADMIN"))
    auth.admin(Headers({"authorization": "Bearer cw-admin"}))
    auth.metrics(Headers({"authorization": "Bearer cw-admin"}))  # the admin key opens it too
    for wrong in ({"authorization": "Bearer cw-red-key"}, {}):
        with pytest.raises(Unauthorized):
            auth.admin(Headers(wrong))
        with pytest.raises(Unauthorized):
            auth.metrics(Headers(wrong))


def test_caller_identity_reads_every_credential_and_nothing_else() -> None:
    assert caller_identity(Headers({"authorization": "Bearer sk-1"})) == "sk-1"
    assert caller_identity(Headers({"x-api-key": "sk-1"})) == "sk-1"  # the same caller as before
    assert caller_identity(Headers({"idempotency-key": "i-1", "user-agent": "sdk"})) is None
    assert caller_identity(Headers({"x-tenant": "acme"})) is None
    assert caller_identity(Headers({"x-tenant": "acme"}), ["X-Tenant"]) == "x-tenant: acme"
    both = caller_identity(Headers({"authorization": "Bearer sk-1", "cookie": "s=1"}))
    assert both == "authorization: Bearer sk-1\ncookie: s=1"
    assert caller_identity(Headers({}), query="access_token=t&alt=json") == "?access_token: t"


HEADERS = ["authorization", "x-api-key", "api-key", "x-goog-api-key", "x-gateway-token", "cookie"]
TOKENS = st.from_regex(r"[A-Za-z0-9._~+/=-]{1,24}", fullmatch=True)
CREDENTIALS = st.dictionaries(st.sampled_from(HEADERS), TOKENS, min_size=1, max_size=4)


def headers_of(credentials: dict[str, str]) -> Headers:
    return Headers(
        {k: f"Bearer {v}" if k == "authorization" else v for k, v in credentials.items()}
    )


SINGLE = {"authorization", "x-api-key", "api-key"}  # alone, each is its value (one caller)


@settings(deadline=None)  # a loaded machine must not fail an example
@given(CREDENTIALS, CREDENTIALS)
def test_different_credentials_are_never_one_caller(a: dict[str, str], b: dict[str, str]) -> None:
    same_single = (
        len(a) == len(b) == 1 and set(a) | set(b) <= SINGLE and list(a.values()) == list(b.values())
    )
    assume(a != b and not same_single)
    assert caller_identity(headers_of(a)) != caller_identity(headers_of(b))


@settings(deadline=None)  # a loaded machine must not fail an example
@given(CREDENTIALS)
def test_a_caller_is_the_same_whatever_order_its_headers_come_in(a: dict[str, str]) -> None:
    items = list(headers_of(a).items())
    reordered = Headers(raw=[(k.encode(), v.encode()) for k, v in reversed(items)])
    assert caller_identity(reordered) == caller_identity(headers_of(a))


@pytest.mark.xfail(
    strict=True,
    reason="caller_identity joins several credentials as 'name: value' lines but keeps a lone "
    "bearer/x-api-key/api-key as its bare value, so a lone key whose value spells another "
    "header's line is the same caller as that header (harmless: crafting it takes the other "
    "credential itself)",
)
def test_a_lone_key_spelling_another_header_is_another_caller() -> None:
    lone = caller_identity(Headers({"x-api-key": "x-goog-api-key: K"}))
    assert lone != caller_identity(Headers({"x-goog-api-key": "K"}))
