"""What a forwarded body names that the proxy acts on, whatever type it declares
(proxy/edge/forwarded_fields.py): JSON declared or merely looking like it, an urlencoded or a
multipart form; a field the proxy acts on given twice is a 400."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.edge.forwarded_fields import fields_of
from proxy.errors import BadRequest

ACTED_ON = ("model", "n", "service_tier")
BOUNDARY = "cw-test-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def multipart(fields: list[tuple[str, str]], files: list[tuple[str, bytes]] | None = None) -> bytes:
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields
    ]
    parts += [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; filename="f.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
        for name, data in files or []
    ]
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def test_no_body_has_no_fields() -> None:
    assert fields_of(None, "application/json", ACTED_ON) is None
    assert fields_of(b"", "application/json", ACTED_ON) is None


def test_a_json_object_is_read_whatever_type_it_declares() -> None:
    body = b' \n{"model": "gpt-x", "n": 10}'
    for content_type in [
        "application/json", "application/json; charset=utf-8", "Application/JSON",
        "application/vnd.api+json", "text/plain", "", "application/octet-stream",
    ]:  # fmt: skip
        assert fields_of(body, content_type, ACTED_ON) == {"model": "gpt-x", "n": 10}


def test_invalid_json_is_a_400_only_when_declared_json() -> None:
    with pytest.raises(BadRequest, match="not valid JSON"):
        fields_of(b'{"model": ', "application/json", ACTED_ON)
    # Only looking like JSON: the upstream's to refuse, the proxy reads nothing.
    assert fields_of(b'{"model": ', "text/plain", ACTED_ON) is None


def test_json_that_is_no_object_or_another_type_has_no_fields() -> None:
    assert fields_of(b'["model"]', "application/json", ACTED_ON) is None
    assert fields_of(b"model=gpt-x", "text/plain", ACTED_ON) is None
    assert fields_of(b"\x89PNG\r\n", "image/png", ACTED_ON) is None


def test_a_key_given_twice_in_json_is_a_400() -> None:
    for content_type in ["application/json", "text/plain"]:
        with pytest.raises(BadRequest):
            fields_of(b'{"model": "allowed", "model": "other"}', content_type, ACTED_ON)


def test_an_urlencoded_form_reads_numbers_and_booleans_as_json_values() -> None:
    body = b"model=gpt-image&n=10&stream=true&user=null&prompt=42+cats&size=-3"
    fields = fields_of(body, "application/x-www-form-urlencoded", ACTED_ON)
    assert fields == {
        "model": "gpt-image", "n": 10, "stream": True, "user": None, "prompt": "42 cats",
        "size": -3,
    }  # fmt: skip
    one = fields_of(b"n=1", "application/x-www-form-urlencoded", ACTED_ON)
    assert one == {"n": 1}  # n=1 is no paid option: it must read as the number 1


def test_an_acted_on_form_field_twice_is_a_400_and_another_field_twice_is_not() -> None:
    form = "application/x-www-form-urlencoded"
    with pytest.raises(BadRequest) as refused:
        fields_of(b"n=1&n=10", form, ACTED_ON)
    assert refused.value.param == "n"
    assert fields_of(b"tag=a&tag=b", form, ACTED_ON) == {"tag": "b"}
    with pytest.raises(BadRequest) as twice:
        fields_of(multipart([("model", "a"), ("model", "b")]), MULTIPART, ACTED_ON)
    assert twice.value.param == "model"


def test_a_multipart_form_reads_its_fields_and_skips_its_files() -> None:
    body = multipart([("model", "whisper-1"), ("n", "2")], files=[("file", b'{"model": "x"}')])
    assert fields_of(body, MULTIPART, ACTED_ON) == {"model": "whisper-1", "n": 2}


def test_a_multipart_body_without_its_boundary_is_a_400() -> None:
    with pytest.raises(BadRequest, match="boundary"):
        fields_of(b"model=x", "multipart/form-data", ACTED_ON)


NAMES = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
TEXT = st.from_regex(r"[A-Za-z][A-Za-z0-9 ._-]{0,12}", fullmatch=True).filter(
    lambda s: s.strip() not in ("true", "false", "null")
)
VALUES = st.one_of(st.integers(-(10**6), 10**6), st.booleans(), st.none(), TEXT)


def spelled(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


@settings(deadline=None)  # a loaded machine must not fail an example
@given(st.dictionaries(NAMES, VALUES, min_size=1, max_size=6))
def test_the_same_fields_are_read_whatever_type_the_body_declares(fields: dict[str, Any]) -> None:
    """A check that read one type only could be dodged by declaring another."""
    as_json = orjson.dumps(fields)
    pairs = [(name, spelled(value)) for name, value in fields.items()]
    read = [
        fields_of(as_json, "application/json", ACTED_ON),
        fields_of(as_json, "text/plain", ACTED_ON),
        fields_of(as_json, "", ACTED_ON),
        fields_of(urlencode(pairs).encode(), "application/x-www-form-urlencoded", ACTED_ON),
        fields_of(multipart(pairs), MULTIPART, ACTED_ON),
    ]
    assert all(r == fields for r in read), read
