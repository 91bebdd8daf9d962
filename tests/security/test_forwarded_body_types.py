"""A forwarded body is read for the fields the proxy acts on whatever type it declares
(proxy/edge/forwarded_fields.py). Read only as ``application/json`` before: a team with no
paid options asked for ``n=10`` by sending its JSON as ``text/plain``, or as a multipart or
urlencoded form; and named another team's stored response the same way (a user's try: both
forwarded, 200)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.responses import Response

from tests.security.conftest import OTHER_KEY, TEAM_KEY, Capture, ProxyFactory, Seen, keys_config

IMAGES = {"model": "gpt-image-1", "prompt": "a cat", "n": 10}
BOUNDARY = "cwboundary7MA4YWxk"


def multipart(fields: list[tuple[str, str]], file: bool = True) -> bytes:
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields
    ]
    if file:  # an image part, read by nobody but the upstream
        parts.append(
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n'
            "Content-Type: image/png\r\n\r\n\x89PNG n=10\r\n"
        )
    return ("".join(parts) + f"--{BOUNDARY}--\r\n").encode("latin-1")


MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
BODIES = {
    "JSON as text/plain": ("/v1/images/generations", orjson.dumps(IMAGES), "text/plain"),
    "JSON with no type": ("/v1/images/generations", orjson.dumps(IMAGES), ""),
    "multipart form": ("/v1/images/edits", multipart([("model", "gpt-image-1"), ("n", "10")]), MULTIPART),
    "urlencoded form": ("/v1/images/generations", b"model=gpt-image-1&prompt=cat&n=10", "application/x-www-form-urlencoded"),
}  # fmt: skip


def no_paid_options(capture: Capture, make_proxy: ProxyFactory) -> Any:
    config = keys_config(capture)
    config["teams"]["other"]["paid_options"] = []
    return make_proxy(**config)


def post(proxy: Any, key: str, path: str, body: bytes, kind: str) -> Any:
    headers = {"content-type": kind} if kind else {}
    with proxy.client(key) as c:
        return c.post(path, content=body, headers=headers)


@pytest.mark.parametrize("form", BODIES)
def test_no_paid_option_under_another_declared_type(
    capture: Capture, make_proxy: ProxyFactory, form: str
) -> None:
    proxy = no_paid_options(capture, make_proxy)
    path, body, kind = BODIES[form]
    refused = post(proxy, OTHER_KEY, path, body, kind)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "option_not_allowed"
    assert capture.seen == []
    one = body.replace(b"10", b"1")
    assert post(proxy, OTHER_KEY, path, one, kind).status_code == 200  # n=1 is no paid option
    assert capture.seen[0].body == one  # forwarded as it came


def test_a_form_field_the_proxy_acts_on_given_twice_is_refused(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    proxy = no_paid_options(capture, make_proxy)
    body = multipart([("model", "gpt-image-1"), ("n", "1"), ("n", "10")])
    refused = post(proxy, OTHER_KEY, "/v1/images/edits", body, MULTIPART)
    assert refused.status_code == 400 and "'n' is given twice" in refused.json()["error"]["message"]
    assert capture.seen == []


def stored_response(seen: Seen) -> Response:
    body = {"id": "resp_abc123", "object": "response", "status": "completed", "output": []}
    return Response(orjson.dumps(body), media_type="application/json")


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_another_teams_response_under_another_declared_type(
    capture: Capture, make_proxy: ProxyFactory, kind: str
) -> None:
    capture.answer = stored_response
    proxy = make_proxy(**keys_config(capture))
    with proxy.client(TEAM_KEY) as c:  # team limited makes resp_abc123
        assert c.post("/v1/responses", json={"model": "gpt-4o", "input": "hi"}).status_code == 200
    if kind.endswith("urlencoded"):
        body = b"model=gpt-4o&input=hi&previous_response_id=resp_abc123"
    else:
        body = orjson.dumps(
            {"model": "gpt-4o", "input": "hi", "previous_response_id": "resp_abc123"}
        )
    stolen = post(proxy, OTHER_KEY, "/v1/responses/input_tokens", body, kind)
    assert stolen.status_code == 403, stolen.text
    assert stolen.json()["error"]["code"] == "not_your_object"
    assert len(capture.seen) == 1
