"""proxy/formats/reused_items.py: a request's leading items that its conversation's last request sent
as they are become that request's objects, are not checked again, and keep their view messages;
nothing a client sees changes. The property: over any sequence of requests (grown, edited,
invalid), parsing and viewing with the memory gives what parsing and viewing afresh gives, the
same error or the same view."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.errors import BadRequest
from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.base import View, WireFormat
from proxy.formats.chat import CHAT
from proxy.formats.responses import RESPONSES
from proxy.formats.reused_items import REUSE_FROM, RecentItems
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


def _twice(body: bytes) -> bytes:
    """The body with its items' key again after the items, holding the last item only."""
    payload = orjson.loads(body)
    key = "input" if "input" in payload else "messages"
    items = payload[key]
    return body[:-1] + b"," + orjson.dumps({key: items[-1:]})[1:]


WRITERS = [
    lambda body: body,
    lambda body: json.dumps(orjson.loads(body)).encode(),
    lambda body: json.dumps(orjson.loads(body), separators=(",", ":"), ensure_ascii=False).encode(),
    lambda body: orjson.dumps({"metadata": {"k": "é"}, **orjson.loads(body)}),
    _twice,
]


# Each format's turns (whole ones are valid; a request cut inside one, or with an item of one
# put in another's place, often is not): conversations are drawn from them, so requests share
# items, grow, lose some, and repeat them with another value.
CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
VALUES = st.sampled_from(["x", 1, True, "é"])  # 1 and true: equal in Python, not in JSON


def _responses_turn(kind: int, call: str, value: Any) -> list[Any]:
    fn = {"type": "function_call", "call_id": call, "name": "read", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": call, "output": value}
    said = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok"}],
    }
    return [
        [{"role": "user", "content": f"task {value}"}],
        [fn, out],
        [said, fn, out],
        [{"type": "reasoning", "id": "rs_1", "summary": []}, fn, out],
        [{"type": "item_reference", "id": "msg_1"}, out],
        [{"role": "developer", "content": "rules"}],
        [{"role": "user", "content": 5}],  # invalid
        [said],  # a run the next turn's calls may continue
        # A call that may go unanswered (its run names it once its answer comes), its answer.
        [{"type": "mcp_approval_request", "id": call, "name": "rm", "arguments": "{}"}],
        [{"type": "mcp_approval_response", "approval_request_id": call, "approve": True}],
    ][kind]


def _anthropic_turn(kind: int, call: str, value: Any) -> list[Any]:
    use = {"type": "tool_use", "id": call, "name": "run", "input": {"flag": value}}
    result = {"type": "tool_result", "tool_use_id": call, "content": "out"}
    more = {"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}
    return [
        [{"role": "user", "content": f"task {value}"}],
        [
            {"role": "assistant", "content": [{"type": "text", "text": "calling"}, use]},
            {"role": "user", "content": [result, more]},
        ],
        [{"role": "assistant", "content": "fine"}],
        [{"role": "system", "content": "re-attached file"}],
        [{"role": "user", "content": [more, result]}],  # invalid: results first
    ][kind]


def _chat_turn(kind: int, call: str, value: Any) -> list[Any]:
    fn = {"name": "f", "arguments": "{}"}
    calls = [{"id": call, "type": "function", "function": fn}]
    return [
        [{"role": "user", "content": f"task {value}"}],
        [
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": call, "content": value},
        ],
        [{"role": "assistant", "content": "fine"}],
    ][kind]


def turns(make: Any, kinds: int) -> st.SearchStrategy[list[Any]]:
    return st.builds(make, st.integers(0, kinds - 1), CALL_IDS, VALUES)


def requests(turn: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[list[list[Any]]]:
    """A conversation's requests: each one the last one with a turn added (mostly), cut back
    to any item, or with an item replaced by another turn's first."""

    def steps(base: list[list[Any]], edits: list[tuple[int, int, list[Any]]]) -> list[list[Any]]:
        current = [item for t in base for item in t]
        out = [list(current)]
        for op, at, new in edits:
            if op == 0 or not current:
                current = [*current, *new]
            elif op == 1:
                current = current[: at % len(current)] or new
            else:
                k = at % len(current)
                current = [*current[:k], new[0], *current[k + 1 :]]
            out.append(list(current))
        return out

    edit = st.tuples(st.sampled_from([0, 0, 0, 0, 1, 2]), st.integers(0, 40), turn)
    return st.builds(steps, st.lists(turn, min_size=1, max_size=4), st.lists(edit, max_size=12))


@pytest.mark.parametrize(
    ("fmt", "write", "turn"),
    [
        (CHAT, chat_body, turns(_chat_turn, 3)),
        (RESPONSES, responses_body, turns(_responses_turn, 10)),
        (ANTHROPIC, anthropic_body, turns(_anthropic_turn, 5)),
    ],
    ids=["chat", "responses", "anthropic"],
)
def test_reuse_gives_what_parsing_afresh_gives(fmt: WireFormat, write: Any, turn: Any) -> None:
    """Each request written as a client might: compact as orjson writes (compared on its
    bytes), with spaces or ASCII escapes (item by item), with another key first, or with its
    items' key a second time after them (the parse takes the second array)."""

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(requests(turn), st.lists(st.integers(0, len(WRITERS) - 1), min_size=13, max_size=13))
    def check(conversation: list[list[Any]], how: list[int]) -> None:
        recent = RecentItems()
        for request, writer in zip(conversation, how, strict=False):
            body = WRITERS[writer](write(request))
            assert outcome(fmt, body, recent) == outcome(fmt, body, None)

    check()


def test_a_marked_message_is_pinned_in_every_request() -> None:
    """The view of a request whose markers were taken out is made from copies: the next
    request's marked message must not become the copy (its marker would be lost)."""
    from starlette.datastructures import Headers

    from proxy.config.settings import load_settings
    from proxy.edge.auth import Principal
    from proxy.edge.intake import build_request
    from proxy.windows.models import build_models

    settings = load_settings(None, models={"m": {"context_window": 8000}})
    models = build_models(settings)
    who = Principal(team="default", config=settings.teams["default"], forward_client_auth=False)
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


def test_a_run_the_next_request_continues_is_viewed_again() -> None:
    """An assistant run ending the last request may go on in the next (its reasoning, another
    message): its message is made again from the whole run."""
    recent = RecentItems()
    said = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok"}],
    }
    items: list[Any] = [{"role": "user", "content": f"step {n}"} for n in range(3)] + [said]
    assert outcome(RESPONSES, responses_body(items), recent)[0] == "view"
    longer = responses_body([*items, {"type": "reasoning", "id": "rs_2", "summary": []}])
    assert outcome(RESPONSES, longer, recent) == outcome(RESPONSES, longer, None)


def test_a_compact_body_is_compared_on_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body written as orjson writes it: the items its last request sent are found on the
    body's bytes, only the rest of the body is parsed, only the new items are written (to find
    where they end), and the body needs no write-back or duplicate-key check; one with spaces
    is parsed whole and has every item written."""
    from proxy.formats import reused_items as module

    items: list[Any] = [{"role": "user", "content": f"step {n}"} for n in range(40)]
    assert outcome(CHAT, chat_body(items), RecentItems()) == outcome(CHAT, chat_body(items), None)
    recent = RecentItems()
    reuse = recent.begin("chat")
    first = CHAT.parse(chat_body(items), reuse)
    CHAT.view(first, reuse)
    reuse.commit(100)
    written: list[Any] = []
    parsed: list[int] = []
    real, read = orjson.dumps, orjson.loads

    def dumps(value: Any, *args: Any) -> bytes:
        written.append(value)
        return real(value, *args)

    def loads(value: bytes) -> Any:
        parsed.append(len(value))
        return read(value)

    monkeypatch.setattr(module.orjson, "dumps", dumps)
    monkeypatch.setattr(module.orjson, "loads", loads)
    grown = [*items, {"role": "assistant", "content": "done"}]
    reuse = recent.begin("chat")
    payload = CHAT.parse(chat_body(grown), reuse)
    assert (reuse.known, reuse.written) == (40, True)
    assert [w for w in written if w in grown] == [grown[-1]]  # the new item alone
    assert parsed == [len(chat_body([grown[-1]]))]  # the body without the items it shares
    assert all(a is b for a, b in zip(payload["messages"], first["messages"], strict=False))
    CHAT.view(payload, reuse)
    reuse.commit(100)
    written.clear()
    spaced = json.dumps({"model": "m", "messages": [*grown, {"role": "user", "content": "x"}]})
    reuse = recent.begin("chat")
    CHAT.parse(spaced.encode(), reuse)
    assert (reuse.known, reuse.written) == (41, False)
    assert len([w for w in written if isinstance(w, dict) and "role" in w]) == 42


def test_an_edit_of_the_same_length_past_the_leading_items_is_seen() -> None:
    """The body's length and its first items are the last request's; one later item says
    something else in as many bytes: that item is parsed, not taken from the last request."""
    recent = RecentItems()
    items: list[Any] = [{"role": "user", "content": f"step {n}"} for n in range(6)]
    assert outcome(CHAT, chat_body(items), recent)[0] == "view"
    items[4] = {"role": "user", "content": "step X"}
    reuse = recent.begin("chat")
    payload = CHAT.parse(chat_body(items), reuse)
    assert reuse.known == 4
    assert payload["messages"] == items


def test_one_callers_items_are_not_reused_for_another() -> None:
    """Two teams send the same conversation: neither reuses what the other sent (its request
    would be answered sooner, telling it what another team sends)."""
    recent = RecentItems()
    items: list[Any] = [{"role": "user", "content": f"step {n}"} for n in range(6)]
    for caller, known in (("a", 0), ("b", 0), ("a", 6), ("b", 6)):
        reuse = recent.begin("chat", caller)
        payload = CHAT.parse(chat_body(items), reuse)
        assert reuse.known == known, caller
        CHAT.view(payload, reuse)
        reuse.commit(100)
    spaced = json.dumps({"model": "m", "messages": items}).encode()  # compared item by item
    for caller, known in (("c", 0), ("d", 0), ("c", 6)):
        reuse = recent.begin("chat", caller)
        payload = CHAT.parse(spaced, reuse)
        assert reuse.known == known, caller
        CHAT.view(payload, reuse)
        reuse.commit(100)


def test_the_proxy_keeps_each_teams_items_apart() -> None:
    from starlette.datastructures import Headers

    from proxy.config.settings import load_settings
    from proxy.edge.auth import Principal
    from proxy.edge.intake import build_request
    from proxy.windows.models import build_models

    settings = load_settings(None, models={"m": {"context_window": 8000}}, teams={"b": {}})
    models = build_models(settings)
    recent = RecentItems()
    body = chat_body([{"role": "user", "content": f"step {n}"} for n in range(6)])
    for team, reuses in (("default", False), ("b", False), ("default", True), ("b", True)):
        who = Principal(team=team, config=settings.teams[team], forward_client_auth=False)
        req = build_request(body, Headers(), settings, models, who, CHAT, None, recent)
        assert (req.reused > 0) == reuses, team


def test_bodies_below_the_proxys_threshold_are_parsed_whole() -> None:
    from starlette.datastructures import Headers

    from proxy.config.settings import load_settings
    from proxy.edge.auth import Principal
    from proxy.edge.intake import build_request
    from proxy.runtime import Runtime
    from proxy.windows.models import build_models

    settings = load_settings(None, models={"m": {"context_window": 100000}})
    models = build_models(settings)
    who = Principal(team="default", config=settings.teams["default"], forward_client_auth=False)
    recent = Runtime.__dataclass_fields__["items"].default_factory()  # type: ignore[misc]
    assert recent.min_body == REUSE_FROM
    small = chat_body([{"role": "user", "content": f"step {n}"} for n in range(6)])
    large = chat_body([{"role": "user", "content": f"step {n} " * 300} for n in range(6)])
    assert len(small) < REUSE_FROM <= len(large)
    for body, reused in ((small, False), (small, False), (large, False), (large, True)):
        req = build_request(body, Headers(), settings, models, who, CHAT, None, recent)
        assert (req.reused > 0) == reused
    assert len(recent) == 1


def test_how_calls_paired_carries_over_only_in_the_same_mode() -> None:
    """A request that only appends resumes the pairing of calls and outputs where its last
    request left it, but not across stateful and stateless: an output whose call is stored
    upstream passes with ``previous_response_id``, and is refused without it."""
    stored = {"type": "function_call_output", "call_id": "c7", "output": "x"}
    user = [{"role": "user", "content": f"step {n}"} for n in range(3)]
    first = orjson.dumps({"model": "m", "previous_response_id": "resp_1", "input": [*user, stored]})
    then = responses_body([*user, stored, {"role": "user", "content": "next"}])
    recent = RecentItems()
    assert outcome(RESPONSES, first, recent)[0] == "view"
    refused = outcome(RESPONSES, then, recent)
    assert refused == outcome(RESPONSES, then, None)
    assert refused[0] == "error" and "no function_call with that id" in refused[1][0]


def test_a_resumed_pairing_still_refuses_an_appended_call_without_its_output() -> None:
    """A valid request leaves no call awaiting its output (its pairing keeps none for the next
    request to walk again); a call the next request appends is checked all the same."""
    user = [{"role": "user", "content": f"step {n}"} for n in range(3)]
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "text"}
    late = {"type": "function_call", "call_id": "c2", "name": "read", "arguments": "{}"}
    answer = {"type": "function_call_output", "call_id": "c2", "output": "more"}
    first = [user[0], call, output, user[1]]
    recent = RecentItems()
    assert outcome(RESPONSES, responses_body(first), recent)[0] == "view"
    unanswered = responses_body([*first, late])
    refused = outcome(RESPONSES, unanswered, recent)
    assert refused == outcome(RESPONSES, unanswered, None)
    assert refused[0] == "error" and "has no output in the input" in refused[1][0]
    assert outcome(RESPONSES, responses_body([*first, late, answer]), recent)[0] == "view"


def test_a_responses_request_that_appends_continues_the_last_view() -> None:
    """An agent's next step only appends: the view of the items before is the last one's, the
    very messages; what the new items could change in it makes it start afresh: an output for
    a call the last request left unanswered, an output after a reference that stands for
    stored calls."""
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "text"}
    asked = {"type": "mcp_approval_request", "id": "a1", "name": "rm", "arguments": "{}"}
    approved = {"type": "mcp_approval_response", "approval_request_id": "a1", "approve": True}
    reference = {"type": "item_reference", "id": "msg_1"}
    stored = {"type": "function_call_output", "call_id": "c7", "output": "x"}
    more = {"type": "function_call_output", "call_id": "c8", "output": "y"}
    user = [{"role": "user", "content": f"step {n}"} for n in range(4)]
    for first, then, whole in (
        ([user[0], call, output, user[1]], [user[2]], True),
        ([user[0], asked, user[1]], [approved, user[2]], False),
        ([user[0], call, output, reference, stored], [more], False),
    ):
        view, again = _appended(RESPONSES, responses_body, first, then)
        shared = [a is b for a, b in zip(again.messages[1:], view.messages[1:], strict=False)]
        assert all(shared) == whole, (first, then)


def _appended(
    fmt: WireFormat, write: Any, first: list[Any], then: list[Any], mark: Any = None
) -> tuple[View, View]:
    """The views of a request and of the next one, ``then`` appended, made with the memory
    (``mark`` is called right before the second); the second is the one made afresh."""
    recent = RecentItems()
    reuse = recent.begin(fmt.name)
    view = fmt.view(fmt.parse(write(first), reuse), reuse)
    reuse.commit(100)
    body = write([*first, *then])
    assert outcome(fmt, body, RecentItems()) == outcome(fmt, body, None)
    afresh = fmt.view(fmt.parse(body, None), None).messages
    if mark is not None:
        mark()
    reuse = recent.begin(fmt.name)
    again = fmt.view(fmt.parse(body, reuse), reuse)
    assert again.messages == afresh
    return view, again


def test_a_messages_request_that_appends_continues_the_last_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As in Responses: the view of the messages before is the last one's, and only the new
    messages are looked at, unless a new tool use is one the earlier results answer (ids used
    twice)."""
    from proxy.formats import anthropic as module

    def use(n: int) -> dict[str, Any]:
        block = {"type": "tool_use", "id": f"t{n}", "name": "run", "input": {}}
        return {"role": "assistant", "content": [block]}

    def result(n: int) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok"}
        return {"role": "user", "content": [block]}

    looked: list[Any] = []
    real = module._answered_uses

    def answered_uses(m: dict[str, Any], answered: set[Any]) -> tuple[bool, ...]:
        looked.append(m)
        return real(m, answered)

    monkeypatch.setattr(module, "_answered_uses", answered_uses)
    task = {"role": "user", "content": "go"}
    for first, then, whole in (
        ([task, use(1), result(1)], [use(2), result(2)], True),
        ([task, use(1), result(1)], [use(1), result(1)], False),  # a use answered before
    ):
        view, again = _appended(ANTHROPIC, anthropic_body, first, then, looked.clear)
        assert len(looked) == (len(then) if whole else len(first) + len(then))
        assert all(a is b for a, b in zip(again.messages[1:4], view.messages[1:4], strict=True))


def agent_items(k: int, fmt: str) -> list[Any]:
    """An agent's request: a task and tool steps of small and large outputs, in ``fmt``."""
    items: list[Any] = [{"role": "user", "content": f"Task {k}: " + "fix the build " * 20}]
    for step in range(12):
        output = f"step {step}: " + ("ok" if step % 3 else "line of output " * 60)
        call_id = f"call_{k}_{step}"
        if fmt == "chat":
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
            }
            items += [{"role": "assistant", "content": None, "tool_calls": [call]}]
            items += [{"role": "tool", "tool_call_id": call_id, "content": output}]
        elif fmt == "responses":
            items += [
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "bash",
                    "arguments": '{"cmd": "ls"}',
                }
            ]
            items += [{"type": "function_call_output", "call_id": call_id, "output": output}]
        else:
            use = {"type": "tool_use", "id": call_id, "name": "bash", "input": {"cmd": "ls"}}
            items += [{"role": "assistant", "content": [use]}]
            result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
            items += [{"role": "user", "content": [result]}]
    return items


BODIES = {"chat": chat_body, "responses": responses_body, "anthropic": anthropic_body}
FORMATS = {"chat": CHAT, "responses": RESPONSES, "anthropic": ANTHROPIC}


def spaced(body: bytes) -> bytes:
    """``body`` as Python's json writes it (the openai and anthropic SDKs): not orjson's bytes,
    so compared item by item, each item's JSON kept."""
    return json.dumps(orjson.loads(body)).encode()


@pytest.mark.parametrize("written", [bytes, spaced])
@pytest.mark.parametrize("name", list(FORMATS))
def test_the_memorys_measure_is_no_less_than_what_it_keeps_alive(name: str, written: Any) -> None:
    """The memory budget gives it its share in bytes of what it holds (proxy/observe/memory.py):
    tracemalloc's count of what 200 agents' last requests keep alive is within that measure."""
    import gc
    import tracemalloc

    bodies = [written(BODIES[name](agent_items(k, name))) for k in range(200)]

    def fill() -> RecentItems:
        recent = RecentItems(min_body=REUSE_FROM)
        for body in bodies:
            reuse = recent.begin(name)
            FORMATS[name].view(FORMATS[name].parse(body, reuse), reuse)
            reuse.commit(len(body))
        return recent

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        recent = fill()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    real = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert len(recent) == 200
    assert real <= recent.held, (real, recent.held)
