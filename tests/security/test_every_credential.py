"""F1 (fourth pass): only ``Authorization: Bearer``, ``x-api-key`` and ``api-key`` made a
passthrough caller. HTTP Basic, Google's ``x-goog-api-key`` or a gateway's own header reached
the upstream all the same, yet every such caller shared one scope and one learner: one caller's
overflow shrank the others' window, and one caller's model recalled another's cleared output
by naming its file. Now every header that can carry a credential (and the ones the config
names) makes the caller, and a request without any keeps recall's originals for itself."""

from __future__ import annotations

import base64

import orjson
import pytest
from starlette.datastructures import Headers
from starlette.responses import Response

from proxy.config.settings import load_settings
from proxy.edge.auth import Authenticator
from proxy.windows.learned import MAX_UNREFUSED, LearnedWindows
from tests.security.conftest import Capture, ProxyFactory, Seen
from tests.security.test_passthrough_windows import body

SMALL = "small-tier-account-1313"
LARGE = "large-tier-account-1414"


def basic(user: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:pw".encode()).decode()}


FORMS = {
    "basic": basic,
    "a query string's key": lambda user: {},  # the key is in the path (``path_of``)
    "x-goog-api-key": lambda user: {"x-goog-api-key": user},
    "a gateway's token": lambda user: {"x-gateway-token": user},
    "a configured header": lambda user: {"x-portal-user": user},
}


def scope(headers: dict[str, str], query: str = "", **config: object) -> tuple[str, str, str]:
    auth = Authenticator(load_settings(None, **config), b"k" * 32)
    who = auth.team(Headers(headers), query)
    return who.scope, who.learns_as, who.alone


@pytest.mark.parametrize("name", ["key", "api_key", "access_token"])
def test_a_credential_in_the_query_string_makes_its_own_caller(name: str) -> None:
    """The query string is forwarded with the request: Google's ``?key=`` is a credential as
    much as its ``x-goog-api-key`` header."""
    a, b = scope({}, f"{name}={SMALL}&alt=sse"), scope({}, f"{name}={LARGE}&alt=sse")
    assert a[0] != b[0] and a[1] != b[1]
    assert scope({}, f"alt=sse&{name}={SMALL}") == a  # the same credential: the same caller
    assert not a[2] and not b[2]
    # A parameter that is no credential makes no caller.
    assert scope({}, "api-version=2024-10-21")[:2] == ("default", "default")


def path_of(form: str, user: str) -> str:
    query = f"?key={user}" if form == "a query string's key" else ""
    return "/v1/chat/completions" + query


@pytest.mark.parametrize("form", [f for f in FORMS if f != "a query string's key"])
def test_each_credential_makes_its_own_caller(form: str) -> None:
    config = {"credential_headers": ["X-Portal-User"]}
    headers = FORMS[form]
    a, b = scope(headers(SMALL), **config), scope(headers(LARGE), **config)
    assert a[0] != b[0] and a[1] != b[1]  # neither state nor lessons shared
    assert scope(headers(SMALL), **config) == a  # the same credential: the same caller
    assert not a[2] and not b[2]


def test_a_per_call_header_named_like_a_key_does_not_split_a_caller() -> None:
    one = scope({"x-api-key": SMALL, "idempotency-key": "stainless-retry-1"})
    two = scope({"x-api-key": SMALL, "idempotency-key": "stainless-retry-2"})
    assert one == two


def test_a_bearer_caller_keeps_the_identity_it_had() -> None:
    """One bearer token alone is the caller it was before other headers counted (its stored
    checkpoints and lessons stay its own across the upgrade)."""
    auth = Authenticator(load_settings(None), b"k" * 32)
    who = auth.team(Headers({"authorization": f"Bearer {SMALL}"}))
    assert who.caller == auth._digest(SMALL)


def test_each_request_without_a_credential_keeps_recall_for_itself() -> None:
    """Their checkpoints, cuts and lessons are the team's anonymous caller's (a checkpoint is
    found only by the messages it covers); recall's originals, which hold what the caller did
    not send, each request's own."""
    first, second = scope({}), scope({})
    assert first[:2] == second[:2] == ("default", "default")
    assert first[2] and second[2] and first[2] != second[2]


def per_account(seen: Seen) -> Response:
    """An upstream whose window is 1,000 tokens for the small account, however it is named."""
    small = SMALL.encode() in seen.query or any(
        SMALL in v or base64.b64encode(f"{SMALL}:pw".encode()).decode() in v
        for v in seen.headers.values()
    )
    if small and len(seen.body) > 6000:  # about 1,000 tokens
        message = (
            "This model's maximum context length is 1000 tokens. However, your messages "
            "resulted in 2400 tokens. Please reduce the length of the messages."
        )
        error = {"message": message, "type": "invalid_request_error",
                 "code": "context_length_exceeded"}  # fmt: skip
        return Response(orjson.dumps({"error": error}), 400, media_type="application/json")
    return Response(orjson.dumps({"id": "c", "choices": []}), media_type="application/json")


@pytest.mark.parametrize("form", FORMS)
def test_one_callers_overflow_does_not_shrink_anothers_window(
    capture: Capture, make_proxy: ProxyFactory, form: str
) -> None:
    capture.answer = per_account
    proxy = make_proxy(
        upstreams={"main": {"base_url": f"{capture.url}/v1"}},
        models={"gpt-4o": {"context_window": 16000, "tokenizer": "o200k_base"}},
        policies={"default": {"summarize": False}},
        **({"credential_headers": ["x-portal-user"]} if form == "a configured header" else {}),
    )
    with proxy.client() as c:
        small = c.post(path_of(form, SMALL), json=body(), headers=FORMS[form](SMALL))
        assert small.status_code == 200
        assert "overflow-retry" in small.headers["x-contextwarden-actions"]
        large = c.post(path_of(form, LARGE), json=body(), headers=FORMS[form](LARGE))
        assert large.status_code == 200
        assert large.headers["x-contextwarden-actions"] == "none"  # sent whole: 16,000 still
        again = c.post(path_of(form, SMALL), json=body(), headers=FORMS[form](SMALL))
        assert again.status_code == 200  # the small account keeps what it learned
        assert "overflow-retry" not in again.headers["x-contextwarden-actions"]


SECRET = "PAYROLL-ROW alice 123456"


def task(outputs: list[str], last: str, first: str = "file0.txt") -> list[dict[str, object]]:
    """One opening (the same for both callers: a client's stock prompt and first ask), then one
    ``read_file`` step per output, then ``last``."""
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": "Look through the project files."},
    ]
    for i, text in enumerate(outputs):
        path = first if i == 0 else f"file{i}.txt"
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "{path}"}}'}}  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": text})
    messages.append({"role": "user", "content": last})
    return messages


def recall_by_name(seen: Seen) -> Response:
    """A model that, offered the recall tool on the second caller's request, asks for the first
    caller's file by name (what a prompt injection in that caller's own text can make it do)."""
    body = orjson.loads(seen.body)
    tools = [t.get("function", {}).get("name") for t in body.get("tools", [])]
    messages = body["messages"]
    asking = "contextwarden_recall" in tools and messages[-1]["role"] == "user"
    if asking and "mine" in str(messages[-1]["content"]):
        call = {"id": "r1", "type": "function", "function": {
            "name": "contextwarden_recall", "arguments": '{"handle": "payroll.csv"}'}}  # fmt: skip
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    else:
        message = {"role": "assistant", "content": "ok"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
    answer = {"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o",
              "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                             "total_tokens": 2}}  # fmt: skip
    return Response(orjson.dumps(answer), media_type="application/json")


@pytest.mark.parametrize("form", ["none", "basic"])
def test_no_caller_recalls_anothers_original(
    capture: Capture, make_proxy: ProxyFactory, form: str
) -> None:
    """Two callers of the same opening: the first's cleared output (a payroll row) is kept for
    recall; the second's model names the first's file to recall. It must get nothing of it."""
    capture.answer = recall_by_name
    proxy = make_proxy(
        upstreams={"main": {"base_url": f"{capture.url}/v1"}},
        models={"gpt-4o": {"context_window": 3000, "tokenizer": "o200k_base"}},
        policies={"default": {"summarize": False, "recall": True}},
    )

    def heavy(k: int) -> str:
        return "".join(
            f"file {k} line {i}: value {i * 7919 % 10007} at {i * k}\n" for i in range(80)
        )

    first = task([f"{SECRET}\n{heavy(0)}", heavy(1), heavy(2), heavy(3)], "go on", "payroll.csv")
    second = task([heavy(4), heavy(5), heavy(6), heavy(7)], "recall mine")
    alice = basic("alice") if form == "basic" else {}
    mallory = basic("mallory") if form == "basic" else {}
    with proxy.client() as c:
        answer = c.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": first},
                        headers=alice)  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert "recall" in answer.headers["x-contextwarden-actions"] or any(
            b"contextwarden_recall" in s.body for s in capture.seen
        )  # the first caller's outputs were cleared, kept for recall
        before = len(capture.seen)
        answer = c.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": second},
                        headers=mallory)  # fmt: skip
        assert answer.status_code == 200, answer.text
    sent = [s.body for s in capture.seen[before:]]
    assert len(sent) >= 2  # the recall was asked for and answered
    assert not any(SECRET.encode() in body for body in sent)


def test_a_flood_of_new_callers_never_stops_anothers_window_being_tracked() -> None:
    """In passthrough anyone may bring a new credential: 4,096 made-up callers answered once
    each filled the table of pairs never refused, and a real caller's answers were no longer
    tracked (its first refusal then had nothing to bisect from). The least recently answered
    pair that was never refused makes room; one that holds a refusal is kept."""
    learned = LearnedWindows()
    learned.refuse("victim", "m", 9000)
    for k in range(MAX_UNREFUSED + 10):
        learned.accept(f"flood-{k}", "m", 100)
    assert learned.accept("real", "m", 5000) is not None
    assert learned.bounds("real", "m") is not None
    bounds = learned.bounds("victim", "m")
    assert bounds is not None and bounds.refused is not None  # a refusal is never let go
