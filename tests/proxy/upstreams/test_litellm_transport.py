"""proxy/upstreams/litellm_client.py's LitellmTransport: the same seam as the HTTP transport,
sending the body through ``litellm.acompletion`` with the key the headers carry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from proxy.config.catalog import Upstream
from proxy.headers import upstream_headers
from proxy.upstreams import litellm_client
from proxy.upstreams.litellm_client import LitellmTransport

UPSTREAM = Upstream(provider="litellm", model="bedrock/claude", base_url="http://gw.test")
BODY = orjson.dumps({"model": "claude", "messages": [{"role": "user", "content": "hi"}]})


class Answer:
    def model_dump(self) -> dict[str, Any]:
        return {"object": "chat.completion", "choices": []}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []

    async def acompletion(**kwargs: Any) -> Answer:
        made.append(kwargs)
        return Answer()

    fake = SimpleNamespace(acompletion=acompletion)
    monkeypatch.setattr(litellm_client, "_litellm", lambda: fake)
    return made


@pytest.mark.parametrize(
    ("key", "incoming", "sent"),
    [
        ("sk-proxy", [("authorization", "Bearer sk-caller")], "sk-proxy"),  # the proxy's own
        (None, [("authorization", "Bearer sk-caller")], "sk-caller"),  # passthrough
        (None, [], None),  # litellm finds its provider's key itself
    ],
)
async def test_the_key_the_headers_carry_is_litellms(
    calls: list[dict[str, Any]], key: str | None, incoming: list[tuple[str, str]], sent: str | None
) -> None:
    headers = upstream_headers(incoming, UPSTREAM, key)
    reply = await LitellmTransport().send(UPSTREAM, "POST", "", headers, BODY)
    assert reply.status == 200 and orjson.loads(reply.body or b"")["object"] == "chat.completion"
    assert calls[0].get("api_key") == sent
    assert calls[0]["model"] == "bedrock/claude" and calls[0]["api_base"] == "http://gw.test"


async def test_a_body_not_whole_is_refused(calls: list[dict[str, Any]]) -> None:
    async def chunks() -> Any:
        yield BODY

    with pytest.raises(TypeError):
        await LitellmTransport().send(UPSTREAM, "POST", "", [], chunks())
    assert not calls
    await LitellmTransport().aclose()  # nothing to close
