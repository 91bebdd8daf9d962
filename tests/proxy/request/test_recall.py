"""Recall: the originals kept (memory, store, index), the recall tool in each wire format, and
the request path's loop, with its bound."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.formats.anthropic import ANTHROPIC
from proxy.formats.chat import CHAT
from proxy.formats.recall import RECALL, answer_of, continued, offer, reserved, scrubbed
from proxy.formats.responses import RESPONSES
from proxy.request.recall import LIMIT, NAMED, NOT_KEPT, RecallMemory, Round, originals, settle
from proxy.upstreams.forwarding import Reply
from strategies.engine import FitRequest, Policy, fit
from strategies.microcompact import ToolResultMicrocompact
from strategies.outputs import handle_of
from strategies.tokens import ChatCounter
from tests.conftest import O200K
from tests.counters import FixedCounter


class Blobs:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get_blob(self, key: str) -> bytes | None:
        return self.data.get(key)

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        self.data[key] = value


def loop(k: int, output: str, path: str) -> list[dict[str, Any]]:
    args = orjson.dumps({"path": path}).decode()
    call = {"id": f"c{k}", "type": "function", "function": {"name": "read_file", "arguments": args}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": output},
    ]


def test_originals_of_cleared_and_dropped_outputs_and_recall_by_handle_or_file() -> None:
    sent = [{"role": "user", "content": "go"}]
    sent += loop(0, "zero " * 50, "a.py") + loop(1, "one " * 50, "b.py") + loop(2, "two", "c.py")
    cleared = ToolResultMicrocompact(keep_recent=1, handles=True).apply(sent, FixedCounter(5))
    forwarded = [cleared[0], *cleared[3:]]  # the first step dropped, the second cleared
    found = originals(sent, forwarded)
    assert found == {
        handle_of(sent[2]): ("zero " * 50, 'read_file {"path":"a.py"}'),
        handle_of(sent[4]): ("one " * 50, 'read_file {"path":"b.py"}'),
    }

    async def check() -> None:
        store = Blobs()
        memory = RecallMemory(store, 60)
        memory.keep("conv", found)
        await memory.drain()
        assert await memory.get("conv", handle_of(sent[4])) == "one " * 50
        assert await memory.get("conv", "a.py") == "zero " * 50
        assert await memory.get("other", "a.py") is None  # per conversation (and caller)
        again = RecallMemory(store, 60)  # another replica, or a restarted proxy: the store
        assert await again.get("conv", handle_of(sent[2])) == "zero " * 50
        assert await again.get("conv", "b.py") == "one " * 50
        assert await again.get("conv", "nothing") is None

    import asyncio

    asyncio.run(check())


def test_a_step_cut_output_recalls_the_part_it_cut() -> None:
    """The newest step's output cut to fit (strategies/step_cut.py): its handle keeps the lines
    the cut left out, which with its head and tail make the original; the whole original
    came back, of which a recall at half the budget showed the head and the tail again."""
    words = ("alpha", "beta", "gamma", "delta", "build", "module")
    lines = [f"{k:5d} | " + " ".join(words[(k * 7 + j) % 6] for j in range(6)) for k in range(3000)]
    lines[1500] = "FAILED tests/test_a.py::test_a - AssertionError: 1 != 0"
    text = "\n".join(lines)
    sent = [{"role": "user", "content": "fix it"}, *loop(0, text, "build.log")]
    counter = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))
    forwarded = fit(
        FitRequest(messages=sent, budget=1500, counter=counter, policy=Policy(recall=True))
    ).messages
    shown = forwarded[-1]["content"].split("\n")
    found = originals(sent, forwarded)
    handle = NAMED.search(shown[0])
    assert handle is not None
    part, call = found[handle.group(1)]
    assert call == 'read_file {"path":"build.log"}'
    gap = next(k for k, line in enumerate(shown) if line.startswith("[... lines"))
    end = shown.index("[...]")
    assert "\n".join([*shown[1:gap], part, *shown[end + 1 :]]) == text
    assert shown[1] not in part and shown[-1] not in part and lines[1500] in part
    # the cut's own handle: the output's, in a later request's placeholder, keeps it whole
    assert handle.group(1) != handle_of(sent[-1])


@pytest.mark.parametrize("fmt", [CHAT, RESPONSES, ANTHROPIC], ids=lambda f: f.name)
def test_the_tool_is_offered_once(fmt: Any) -> None:
    payload: dict[str, Any] = {"model": "m", "tools": [{"type": "function", "name": "x"}]}
    offered = offer(fmt, payload)
    assert offered is not None and RECALL in orjson.dumps(offered).decode()
    assert offer(fmt, offered) is None  # never beside a tool of the same name
    assert offered["tools"][:1] == payload["tools"]  # the client's own first, as they came
    if fmt is CHAT:
        assert offer(fmt, {"model": "m", "n": 2}) is None
        assert offer(fmt, {"model": "m", "functions": []}) is None


def chat_sse(calls: list[tuple[str, str, str]]) -> bytes:
    out = [b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"ok "}}]}']
    for k, (i, name, args) in enumerate(calls):
        head = {
            "index": k,
            "id": i,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        out.append(
            b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
        )
        part = {"index": k, "function": {"arguments": args}}
        out.append(
            b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [part]}}]})
        )
    out.append(b"data: [DONE]")
    return b"\n\n".join(out) + b"\n\n"


def test_chat_answers_whole_and_streamed() -> None:
    recall = {
        "id": "r1",
        "type": "function",
        "function": {"name": RECALL, "arguments": '{"handle":"rabc"}'},
    }
    mine = {"id": "m1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    body = orjson.dumps(
        {
            "choices": [
                {"message": {"role": "assistant", "content": None, "tool_calls": [mine, recall]}}
            ]
        }
    )
    whole = answer_of(CHAT, body, False)
    assert whole.calls == [("r1", "rabc")]
    assert whole.turn["tool_calls"] == [recall]  # the client's own call was never run: it goes
    streamed = answer_of(CHAT, chat_sse([("r1", RECALL, '{"handle":"rabc"}')]), True)
    assert streamed.calls == [("r1", "rabc")] and streamed.turn["content"] == "ok "
    payload = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    more = continued(CHAT, payload, whole, ["the original"])
    assert more["messages"][-1] == {"role": "tool", "tool_call_id": "r1", "content": "the original"}
    assert answer_of(CHAT, chat_sse([("m1", "read_file", "{}")]), True).calls == []


def test_responses_and_messages_answers() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "encrypted_content": "x"}
    call = {
        "type": "function_call",
        "call_id": "c1",
        "name": RECALL,
        "arguments": '{"handle":"r1"}',
    }
    own = {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"}
    done = {"type": "response.completed", "response": {"output": [reasoning, call, own]}}
    stream = b"event: response.completed\ndata: " + orjson.dumps(done) + b"\n\n"
    answer = answer_of(RESPONSES, stream, True)
    assert answer.calls == [("c1", "r1")] and answer.turn == [reasoning, call]
    more = continued(RESPONSES, {"model": "m", "input": "go"}, answer, ["text"])
    assert more["input"][0] == {"role": "user", "content": "go"}
    assert more["input"][-1] == {"type": "function_call_output", "call_id": "c1", "output": "text"}

    events = [
        {"type": "message_start", "message": {"content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "sig"},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": RECALL, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"hand'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": 'le":"r9"}'},
        },
    ]
    raw = b"".join(b"event: x\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)
    answer = answer_of(ANTHROPIC, raw, True)
    assert answer.calls == [("t1", "r9")]
    assert answer.turn["content"][0] == {"type": "thinking", "thinking": "hm", "signature": "sig"}


def test_a_responses_answer_echoing_the_tool_is_scrubbed_and_others_kept_as_they_came() -> None:
    tools = [{"type": "function", "name": "x"}, {"type": "function", "name": RECALL}]
    body = orjson.dumps({"id": "resp", "tools": tools, "output": []})
    assert orjson.loads(scrubbed(body, False))["tools"] == tools[:1]
    event = b"data: " + orjson.dumps({"type": "response.created", "response": {"tools": tools}})
    assert RECALL.encode() not in scrubbed(b"event: response.created\n" + event + b"\n\n", True)
    plain = b'{"id":"x"}'
    assert scrubbed(plain, False) is plain


@pytest.mark.parametrize(
    ("payload", "name"),
    [
        ({"tools": [{"name": "read_file"}]}, RECALL),
        ({"tools": [{"name": RECALL}]}, f"{RECALL}_2"),
        ({"tools": [{"name": RECALL}, {"name": f"{RECALL}_2"}]}, f"{RECALL}_3"),
        ({"input": [{"type": "additional_tools", "tools": [{"name": RECALL}]}]}, f"{RECALL}_2"),
        ({"tools": [{"name": f"{RECALL}_23"}, {"name": "x_" + RECALL}]}, RECALL),  # not equal
        ({"messages": [{"content": f"say {RECALL} twice"}]}, RECALL),  # inside a text
    ],
)
def test_the_name_is_one_the_request_does_not_use(payload: dict[str, Any], name: str) -> None:
    assert reserved(orjson.dumps(payload), payload) == name
    # A client spelling the name with JSON escapes names the same tool.
    escaped = orjson.dumps(payload).replace(b"contextwarden", b"\\u0063ontextwarden")
    assert reserved(escaped, orjson.loads(escaped)) == name


def test_the_first_free_number_is_taken_past_many_used() -> None:
    payload = {"tools": [{"name": RECALL}] + [{"name": f"{RECALL}_{k}"} for k in range(2, 20000)]}
    assert reserved(orjson.dumps(payload), payload) == f"{RECALL}_20000"


def reply_of(body: dict[str, Any]) -> Reply:
    return Reply(
        status=200, headers=[("content-type", "application/json")], body=orjson.dumps(body)
    )


def recalling_answer(handle: str) -> dict[str, Any]:
    call = {
        "id": f"call-{handle}",
        "type": "function",
        "function": {"name": RECALL, "arguments": orjson.dumps({"handle": handle}).decode()},
    }
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


async def test_the_loop_answers_recalls_itself_and_is_bounded() -> None:
    memory = RecallMemory()
    memory.keep("conv", {"r000000000001": ("the original", "read_file a")})
    sent: list[tuple[dict[str, Any], bool]] = []
    answers = [
        recalling_answer("r000000000001"),
        recalling_answer("nope"),
        recalling_answer("r000000000001"),
    ]
    answers.append({"choices": [{"message": {"role": "assistant", "content": "done"}}]})

    async def build(body: bytes, offered: bool) -> Any:
        sent.append((orjson.loads(body), offered))
        return None

    async def send(_: Any) -> tuple[Reply, Any]:
        return reply_of(answers[len(sent)]), None

    rounds = Round(
        build=build,
        send=send,
        memory=memory,
        conversation="conv",
        counter=FixedCounter(1),
        budget=1000,
        max_recalls=2,
    )
    payload = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    reply, used = await settle(reply_of(answers[0]), CHAT, payload, rounds)
    assert used == 2 and reply.body is not None
    assert orjson.loads(reply.body)["choices"][0]["message"]["content"] == "done"
    results = [m["content"] for m in sent[-1][0]["messages"] if m["role"] == "tool"]
    assert results == ["the original", NOT_KEPT.format(handle="nope"), LIMIT]
    assert [offered for _, offered in sent] == [True, False, False]  # withdrawn at the bound


async def test_a_model_that_never_stops_recalling_gets_a_502_not_the_call() -> None:
    from proxy.errors import UpstreamUnavailable

    async def build(body: bytes, offered: bool) -> Any:
        return None

    async def send(_: Any) -> tuple[Reply, Any]:
        return reply_of(recalling_answer("r000000000001")), None

    rounds = Round(
        build=build,
        send=send,
        memory=RecallMemory(),
        conversation="conv",
        counter=FixedCounter(1),
        budget=1000,
        max_recalls=3,
    )
    payload = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    with pytest.raises(UpstreamUnavailable):
        await settle(reply_of(recalling_answer("r000000000001")), CHAT, payload, rounds)
