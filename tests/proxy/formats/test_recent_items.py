"""proxy/formats/recent.py: a request's leading items that its conversation's last request sent
as they are become that request's objects, are not checked again, and keep their view messages;
nothing a client sees changes. The property: over any sequence of requests (grown, edited,
invalid), parsing and viewing with the memory gives what parsing and viewing afresh gives, the
same error or the same view."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.edge.errors import BadRequest
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.base import View, WireFormat
from proxy.formats.chat import CHAT
from proxy.formats.recent import RecentItems
from proxy.formats.responses import RESPONSES
from proxy.request.conversations import message_digest
from strategies.messages import SOURCE


def chat_body(items: list[Any]) -> bytes:
    return orjson.dumps({"model": "m", "messages": items})


def responses_body(items: list[Any]) -> bytes:
    return orjson.dumps({"model": "m", "instructions": "Be brief.", "input": items})


def anthropic_body(items: list[Any]) -> bytes:
    return orjson.dumps({"model": "m", "max_tokens": 64, "system": "Be brief.", "messages": items})


def shown(view: View) -> bytes:
    """A view as the engine and the writers see it: its messages, their sources' JSON, which
    messages are pinned and continuing (by position)."""
    ids = {id(m): i for i, m in enumerate(view.messages)}
    messages = [{k: v for k, v in m.items() if k != SOURCE} for m in view.messages]
    sources = [m.get(SOURCE) for m in view.messages]
    flags = [sorted(ids[i] for i in view.pinned), sorted(ids[i] for i in view.continuing)]
    return orjson.dumps([messages, sources, flags, view.items])


def outcome(fmt: WireFormat, body: bytes, recent: RecentItems | None) -> tuple[str, Any]:
    reuse = recent.begin(fmt.name) if recent is not None else None
    try:
        payload = fmt.parse(body, reuse)
        view = fmt.view(payload, reuse)
    except BadRequest as exc:
        return "error", (exc.message, exc.param)
    if reuse is not None:
        reuse.commit(len(body))
    digests = [message_digest(m) for m in view.messages]
    return "view", (shown(view), orjson.dumps(payload), digests)


def test_equal_leading_items_become_the_last_requests_objects_and_keep_their_view() -> None:
    recent = RecentItems()
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "text"}
    first = [{"role": "user", "content": "read it"}, call, output]
    reuse = recent.begin("responses")
    before = RESPONSES.parse(responses_body(first), reuse)
    view = RESPONSES.view(before, reuse)
    reuse.commit(100)

    again = recent.begin("responses")
    after = RESPONSES.parse(responses_body([*first, {"role": "user", "content": "next"}]), again)
    assert again.known == 3
    assert all(a is b for a, b in zip(after["input"], before["input"], strict=False))
    second = RESPONSES.view(after, again)
    assert all(a is b for a, b in zip(second.messages[1:4], view.messages[1:4], strict=True))
    assert second.messages[4] == {"role": "user", "content": "next", SOURCE: [after["input"][3]]}


def test_json_that_parses_equal_is_not_the_same_item() -> None:
    """``true`` and ``1`` are equal in Python: the item that changed keeps its own value."""
    recent = RecentItems()
    use = {"type": "tool_use", "id": "t1", "name": "run", "input": {"flag": 1}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    items: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    assert outcome(ANTHROPIC, anthropic_body(items), recent)[0] == "view"
    items[1] = {"role": "assistant", "content": [{**use, "input": {"flag": True}}]}
    reuse = recent.begin("anthropic")
    payload = ANTHROPIC.parse(anthropic_body(items), reuse)
    assert reuse.known == 1
    assert payload["messages"][1]["content"][0]["input"]["flag"] is True


def test_an_item_that_changed_is_checked_again() -> None:
    recent = RecentItems()
    items: list[Any] = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert outcome(CHAT, chat_body(items), recent)[0] == "view"
    items[1] = {"role": "assistant", "content": 7}
    kind, (_, param) = outcome(CHAT, chat_body(items), recent)
    assert kind == "error" and param == "messages[1].content"


def test_a_refused_request_is_not_remembered() -> None:
    """Its items were not all checked: a later request matching them checks them itself."""
    recent = RecentItems()
    items: list[Any] = [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]
    assert outcome(CHAT, chat_body(items), recent)[0] == "error"
    assert len(recent) == 0
    assert outcome(CHAT, chat_body(items), recent)[0] == "error"


def test_a_call_answered_later_is_viewed_again() -> None:
    """An assistant run's view names only the calls with outputs: when an output for an
    earlier call arrives, the run's message is made again."""
    recent = RecentItems()
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    done = {"type": "function_call_output", "call_id": "c1", "output": "x"}
    items: list[Any] = [{"role": "user", "content": "go"}, call]
    first = outcome(RESPONSES, responses_body(items), recent)  # stateless: refused, unanswered
    assert first[0] == "error"
    body = orjson.dumps({"model": "m", "input": items, "previous_response_id": "r1"})
    assert outcome(RESPONSES, body, recent)[0] == "view"
    body = orjson.dumps({"model": "m", "input": [*items, done], "previous_response_id": "r1"})
    assert outcome(RESPONSES, body, recent) == outcome(RESPONSES, body, None)


# A pool of items for each format: conversations are drawn from it, so requests share items,
# grow, lose some, and repeat them with another value.
CALL_IDS = ("c1", "c2", "c3")
RESPONSES_ITEMS = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.sampled_from(["a", "b", "1"])),
    st.builds(
        lambda t: {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": t}],
        },
        st.sampled_from(["ok", "done"]),
    ),
    st.builds(
        lambda c: {"type": "function_call", "call_id": c, "name": "read", "arguments": "{}"},
        st.sampled_from(CALL_IDS),
    ),
    st.builds(
        lambda c, o: {"type": "function_call_output", "call_id": c, "output": o},
        st.sampled_from(CALL_IDS),
        st.sampled_from(["x", 1, True]),
    ),
    st.just({"type": "reasoning", "id": "rs_1", "summary": []}),
    st.just({"type": "item_reference", "id": "msg_1"}),
    st.just({"role": "user", "content": 5}),  # invalid
)
ANTHROPIC_ITEMS = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.sampled_from(["a", "b"])),
    st.builds(
        lambda c, flag: {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": c, "name": "run", "input": {"flag": flag}},
            ],
        },
        st.sampled_from(CALL_IDS),
        st.sampled_from([1, True]),
    ),
    st.builds(
        lambda c: {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": c, "content": "out"},
                {"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}},
            ],
        },
        st.sampled_from(CALL_IDS),
    ),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.sampled_from(["fine", "ok"])),
    st.just({"role": "system", "content": "re-attached file"}),
)
CHAT_ITEMS = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.sampled_from(["a", "b", 1])),
    st.builds(
        lambda c: {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        st.sampled_from(CALL_IDS),
    ),
    st.builds(
        lambda c: {"role": "tool", "tool_call_id": c, "content": "r"}, st.sampled_from(CALL_IDS)
    ),
)


def requests(items: st.SearchStrategy[Any]) -> st.SearchStrategy[list[list[Any]]]:
    """A conversation's requests: each one the last one grown, cut back or with an item
    replaced."""

    def steps(base: list[Any], edits: list[tuple[int, int, Any]]) -> list[list[Any]]:
        out, current = [], list(base)
        for op, at, item in edits:
            if op == 0 or not current:
                current = [*current, item]
            elif op == 1:
                current = current[: at % len(current)] or [item]
            else:
                current = [*current[: at % len(current)], item, *current[at % len(current) + 1 :]]
            out.append(list(current))
        return out

    edit = st.tuples(st.sampled_from([0, 0, 0, 1, 2]), st.integers(0, 20), items)
    return st.builds(steps, st.lists(items, min_size=1, max_size=6), st.lists(edit, max_size=10))


@pytest.mark.parametrize(
    ("fmt", "write", "items"),
    [
        (CHAT, chat_body, CHAT_ITEMS),
        (RESPONSES, responses_body, RESPONSES_ITEMS),
        (ANTHROPIC, anthropic_body, ANTHROPIC_ITEMS),
    ],
    ids=["chat", "responses", "anthropic"],
)
def test_reuse_gives_what_parsing_afresh_gives(fmt: WireFormat, write: Any, items: Any) -> None:
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(requests(items))
    def check(conversation: list[list[Any]]) -> None:
        recent = RecentItems()
        for request in conversation:
            body = write(request)
            assert outcome(fmt, body, recent) == outcome(fmt, body, None)

    check()


def test_a_marked_message_is_pinned_in_every_request() -> None:
    """The view of a request whose markers were taken out is made from copies: the next
    request's marked message must not become the copy (its marker would be lost)."""
    from starlette.datastructures import Headers

    from proxy.config.settings import load_settings
    from proxy.edge.auth import Principal
    from proxy.edge.intake import build_request
    from proxy.edge.runtime import build_models

    settings = load_settings(None, models={"m": {"context_window": 8000}})
    models = build_models(settings)
    who = Principal("default", settings.teams["default"], forward_client_auth=False)
    recent = RecentItems()
    rule = {"role": "user", "content": "RULE", "contextwarden": {"pin": True}}
    messages: list[Any] = [{"role": "system", "content": "s"}, rule]
    for turn in range(3):
        messages.append({"role": "user", "content": f"turn {turn}"})
        body = chat_body(messages)
        req = build_request(body, Headers(), settings, models, who, CHAT, None, recent)
        pinned = [m for m in req.view.messages if id(m) in req.pinned]
        assert pinned == [{"role": "user", "content": "RULE"}], turn
        assert b"contextwarden" not in req.body
