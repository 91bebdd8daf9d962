"""From a request's bytes and headers to what the planner needs (proxy/edge/intake.py): the
proxy's own controls taken out of the body (which is otherwise forwarded as it came) and
allowed to the team, per-message pins, the model resolved and allowed, the route serving the
format."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from starlette.datastructures import Headers

from proxy.config.settings import Settings, load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import (
    Controls,
    allowed_controls,
    build_request,
    read_request,
    take_controls,
    take_pins,
)
from proxy.errors import BadRequest, Forbidden
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.chat import CHAT
from proxy.windows.models import Models, build_models
from proxy.wire import Credential

TEAMS = {
    "default": {},
    "free": {"allowed_policies": ["lean"], "allow_session_memory": True,
             "allow_disable_trimming": True},
    "limited": {"models": ["other"]},
}  # fmt: skip


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(
        None,
        upstreams={"demo": {"base_url": "http://upstream.test/v1"}},
        models={"small": {"context_window": 8000, "tokenizer": "o200k_base"}, "other": {}},
        policies={"default": {"summarize": False}, "lean": {"summarize": False}},
        teams=TEAMS,
    )


@pytest.fixture(scope="module")
def models(settings: Settings) -> Models:
    return build_models(settings)


def who(settings: Settings, team: str = "default", passthrough: bool = True) -> Principal:
    return Principal(team=team, config=settings.teams[team], forward_client_auth=passthrough)


def body(**extra: Any) -> bytes:
    messages = [{"role": "user", "content": "hello"}]
    return orjson.dumps({"model": "small", "messages": messages, **extra})


NO_HEADERS = Headers({})


def test_a_body_without_controls_is_forwarded_byte_for_byte() -> None:
    raw = b'{ "model":"small",  "messages":[{"role":"user","content":"hi"}], "x":1.50 }'
    payload = orjson.loads(raw)
    out, same, controls = take_controls(raw, payload, NO_HEADERS)
    assert out is raw and same is payload
    assert controls == Controls()


def test_the_contextwarden_object_is_taken_out_and_read() -> None:
    raw = body(contextwarden={"policy": "lean", "trim": False, "session_memory": "notes"}, x=1)
    out, payload, controls = take_controls(raw, orjson.loads(raw), NO_HEADERS)
    assert "contextwarden" not in payload and b"contextwarden" not in out
    assert orjson.loads(out) == payload and payload["x"] == 1
    assert controls == Controls(session_memory="notes", policy="lean", trim=False)


def test_header_controls_are_read_and_the_body_object_wins() -> None:
    headers = Headers(
        {"x-contextwarden-policy": "lean", "x-contextwarden-session-memory": "from header",
         "x-contextwarden-pin-last": "TRUE"}
    )  # fmt: skip
    raw = body()
    _, _, controls = take_controls(raw, orjson.loads(raw), headers)
    assert controls == Controls(
        session_memory="from header", policy="lean", trim=True, pinned=frozenset(), pin_last=True
    )
    raw = body(contextwarden={"policy": "default"})
    _, _, chosen = take_controls(raw, orjson.loads(raw), headers)
    assert chosen.policy == "default" and chosen.session_memory == "from header"


KEYS = st.text(max_size=8).filter(lambda k: k != "contextwarden")
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)


@examples(deadline=None)  # a loaded machine must not fail an example
@given(st.dictionaries(KEYS, JSON, max_size=6), st.booleans())
def test_every_other_field_is_kept_as_it_was(fields: dict[str, Any], trim: bool) -> None:
    raw = orjson.dumps({**fields, "contextwarden": {"trim": trim}})
    out, payload, controls = take_controls(raw, orjson.loads(raw), NO_HEADERS)
    assert orjson.loads(out) == payload == fields
    assert controls.trim is trim


def test_malformed_controls_are_a_400() -> None:
    cases: list[tuple[Any, str]] = [
        ("lean", "must be an object"), ({"pin": True}, "unknown contextwarden option"),
        ({"policy": 3}, "policy' must be a string"), ({"trim": "no"}, "trim' must be a boolean"),
        ({"session_memory": ["x"]}, "session_memory' must be a string"),
    ]  # fmt: skip
    for controls, message in cases:
        raw = body(contextwarden=controls)
        with pytest.raises(BadRequest, match=message) as refused:
            take_controls(raw, orjson.loads(raw), NO_HEADERS)
        assert refused.value.param == "contextwarden"


def test_message_markers_are_stripped_and_pin_their_messages() -> None:
    messages = [
        {"role": "system", "content": "s", "contextwarden": {"pin": True}},
        {"role": "user", "content": "u", "contextwarden": {"pin": False}},
        {"role": "user", "content": "v"},
    ]
    payload, pinned, marked = take_pins({"model": "m", "messages": messages}, "messages")
    assert marked and all("contextwarden" not in m for m in payload["messages"])
    assert pinned == {id(payload["messages"][0])}
    assert payload["messages"][2] is messages[2]  # untouched messages are the same objects
    unmarked = {"messages": messages[2:]}
    assert take_pins(unmarked, "messages") == (unmarked, frozenset(), False)
    # The first ``known`` messages are the last request's: never looked at for a marker.
    assert take_pins({"messages": messages[:1]}, "messages", known=1)[2] is False


def test_a_malformed_marker_is_a_400_naming_its_message() -> None:
    for marker in [True, {"pin": "yes"}, {"pin": True, "weight": 2}]:
        messages = [{"role": "user", "content": "a"}, {"role": "user", "contextwarden": marker}]
        with pytest.raises(BadRequest) as refused:
            take_pins({"messages": messages}, "messages")
        assert refused.value.param == "messages[1].contextwarden", marker


def test_a_team_is_allowed_only_the_controls_it_was_given(settings: Settings) -> None:
    free, plain = who(settings, "free"), who(settings)
    assert allowed_controls(Controls(policy="lean"), free, settings, "default") == "lean"
    assert allowed_controls(Controls(policy="default"), plain, settings, "default") == "default"
    assert allowed_controls(Controls(), plain, settings, "default") == "default"
    with pytest.raises(BadRequest, match="unknown policy"):
        allowed_controls(Controls(policy="nope"), free, settings, "default")
    for controls, code in [
        (Controls(policy="lean"), "policy_not_allowed"),
        (Controls(session_memory="notes"), "session_memory_not_allowed"),
        (Controls(trim=False), "trim_not_allowed"),
    ]:
        with pytest.raises(Forbidden) as refused:
            allowed_controls(controls, plain, settings, "default")
        assert refused.value.code == code
    allowed_controls(Controls(session_memory="notes", trim=False), free, settings, "default")


def test_read_request_resolves_the_model_and_refuses_what_the_team_may_not(
    settings: Settings, models: Models
) -> None:
    raw = body(contextwarden={"policy": "lean"}, temperature=0.5)
    intake = read_request(raw, NO_HEADERS, settings, models, who(settings, "free"))
    assert intake.spec.name == "small" and intake.policy == "lean"
    assert orjson.loads(intake.body) == orjson.loads(body(temperature=0.5))
    with pytest.raises(Forbidden) as refused:
        read_request(body(), NO_HEADERS, settings, models, who(settings, "limited"))
    assert refused.value.param == "model"
    with pytest.raises(Forbidden) as paid:
        read_request(body(n=3), NO_HEADERS, settings, models, who(settings, "limited"))
    assert paid.value.code == "model_not_allowed"  # the model is checked first
    with pytest.raises(BadRequest):  # the format's own validation: every 400 from the body
        read_request(b'{"model": "small"}', NO_HEADERS, settings, models, who(settings))


def test_a_format_the_route_does_not_serve_is_a_400(settings: Settings, models: Models) -> None:
    raw = orjson.dumps(
        {"model": "small", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    )
    with pytest.raises(BadRequest) as refused:
        read_request(raw, NO_HEADERS, settings, models, who(settings), ANTHROPIC)
    assert refused.value.code == "unsupported_api"


def test_the_built_request_carries_pins_and_the_callers_credential_only_in_passthrough(
    settings: Settings, models: Models
) -> None:
    messages = [
        {"role": "system", "content": "rules", "contextwarden": {"pin": True}},
        {"role": "user", "content": "hi"},
    ]
    raw = orjson.dumps({"model": "small", "messages": messages})
    headers = Headers({"authorization": "Bearer sk-caller"})
    req = build_request(raw, headers, settings, models, who(settings), CHAT)
    pinned = [m for m in req.view.messages if id(m) in req.pinned]
    assert [m["content"] for m in pinned] == ["rules"]
    assert b"contextwarden" not in req.body
    assert req.credential == Credential("sk-caller", "authorization")
    keyed = build_request(raw, headers, settings, models, who(settings, passthrough=False))
    assert keyed.credential is None
