"""What the proxy learns about windows and capabilities, attacked (issue #55, fourth pass): a
server's absurd figure (F7), a model name that is a path (F10)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx

from proxy.cli import main
from proxy.config.catalog import Upstream as UpstreamConfig
from proxy.config.settings import load_settings
from proxy.stores import open_store
from proxy.summaries.llm import LLMSummarizer, SummarizerFailed
from proxy.windows.discovery import (
    MAX_FAILED,
    MAX_KNOWN,
    SILENT_RETRY,
    DiscoveredWindows,
    Discovery,
    Forget,
)
from proxy.windows.tokenizers import get_encoding
from tests.proxy.upstreams.test_forwarding import BASE, _running
from tests.proxy.windows.test_window_learning import MODEL, ROOT, Upstream, config, no_figures


def ollama_says(context: Any) -> None:
    """An Ollama whose loaded model's ``context_length`` is ``context``."""
    loaded = {"name": MODEL, "model": MODEL, "size": 1, "context_length": context}
    cards = {"object": "list", "data": [{"id": MODEL, "owned_by": "library"}]}
    respx.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json=cards))
    respx.get(f"{ROOT}/api/ps").mock(return_value=httpx.Response(200, json={"models": [loaded]}))


@pytest.mark.parametrize("context", [10**300, 3.7, 1, 1e300, -5, "8192"])
@respx.mock
async def test_an_absurd_discovered_window_is_unknown_never_a_500(
    monkeypatch: pytest.MonkeyPatch, context: Any
) -> None:
    # F7: 300 digits raised OverflowError (a 500 on every request of the model); 3.7 became 3
    # and 1 passed (every request refused); 1e300 passed.
    upstream = Upstream(100_000, no_figures)
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    ollama_says(context)
    admin = {"authorization": "Bearer cw-admin"}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}]}
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch)) as client:
            answer = await client.post("/v1/chat/completions", json=body)
            said = (await client.get(f"/admin/windows/default/{MODEL}", headers=admin)).json()
    assert answer.status_code == 200, answer.text
    assert said["upstream_window"] is None  # unknown: the figure was no window
    assert upstream.sent  # the request reached the upstream


@pytest.mark.parametrize("name", ["..", ".", "a/../../admin", "x\\..", "bad\nname"])
@respx.mock
async def test_a_model_name_never_becomes_a_path_of_the_servers_api(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # F10: a model named ``..`` was asked for as /api/v0/models/.. (LM Studio's discovery).
    asked = respx.get(url__startswith=ROOT).mock(return_value=httpx.Response(404))
    respx.post(f"{BASE}/chat/completions").mock(side_effect=Upstream(100_000, no_figures))
    body = {"model": name, "messages": [{"role": "user", "content": "hello"}]}
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="lmstudio")) as client:
            answer = await client.post("/v1/chat/completions", json=body)
    assert answer.status_code < 500
    paths = [c.request.url.raw_path.decode() for c in asked.calls]
    assert not [p for p in paths if p.startswith("/api/v0")], paths


@pytest.mark.parametrize("limit", ["9" * 5000, "9" * 300, "3"])
@respx.mock
async def test_an_absurd_figure_in_an_overflow_error_is_no_window_never_a_500(
    monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    # F7, the learned side: the figure an overflow error states is a window too.
    def over(n: int) -> httpx.Response:
        message = f"This model's maximum context length is {limit} tokens. Please reduce it."
        error = {"message": message, "type": "invalid_request_error", "code": None}
        return httpx.Response(400, json={"error": error})

    respx.post(f"{BASE}/chat/completions").mock(side_effect=Upstream(50, over))
    admin = {"authorization": "Bearer cw-admin"}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello " * 60}]}
    with tempfile.TemporaryDirectory() as data:
        async with _running(config(data, monkeypatch, discovery="off")) as client:
            answer = await client.post("/v1/chat/completions", json=body)
            listed = (await client.get("/admin/learned-windows", headers=admin)).json()
    assert answer.status_code == 400, answer.text  # the upstream's refusal, relayed
    assert listed["learned_windows"] == {}


class Server:
    """A vLLM's /v1/models that lists ``known`` models (the others taught nothing), or a
    llama.cpp-like one that states its one window for any name (``any_name``)."""

    def __init__(self, known: set[str], any_name: bool = False) -> None:
        self.known, self.any_name = known, any_name

    async def fetch(self, name: str, method: str, url: str, body: Any) -> Any:
        model = str(url).rpartition("?model=")[2]
        if self.any_name:
            return {"default_generation_settings": {"n_ctx": 8192}, "model": model}
        cards = [{"id": m, "owned_by": "vllm", "max_model_len": 8192} for m in self.known]
        return {"object": "list", "data": cards}


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def discovery_of(
    server: Server, clock: Clock, kept: dict[str, int], forget: Forget | None = None
) -> Discovery:
    async def persist(key: str, value: int) -> None:
        kept[key] = value

    return Discovery(DiscoveredWindows(), server.fetch, persist, clock, forget)


async def test_a_flood_of_made_up_names_leaves_discovery_on_for_everyone() -> None:
    # F6: the table of asked models was capped at 4,096 pairs, failures included, never
    # pruned: 4,100 made-up names switched discovery off for every new model until restart.
    vllm = UpstreamConfig(base_url="http://local.test/v1", discovery="vllm")
    server, clock, kept = Server({"real"}), Clock(), dict[str, int]()
    d = discovery_of(server, clock, kept)
    for i in range(4100):
        await d.ensure("local", vllm, f"made-up-{i}")
    assert await d.ensure("local", vllm, "real")
    assert d.found.get("local", "real") is not None
    assert d.failed.count("local") <= MAX_FAILED  # bounded apart from what servers said
    assert await d.ensure("other", vllm, "real")  # another upstream's table is its own
    clock.now += SILENT_RETRY + 1  # failures expire: they are asked again, then dropped
    await d.ensure("local", vllm, "made-up-x")
    assert d.failed.count("local") == 1


async def test_names_a_server_answers_for_any_name_do_not_crowd_out_the_used_ones() -> None:
    # F6 on a server that states its window for whatever name it is asked about (llama.cpp's
    # /props): the least recently used is dropped, here and from the store, and asked again.
    llama = UpstreamConfig(base_url="http://local.test/v1", discovery="llama.cpp")
    server, clock, kept = Server(set(), any_name=True), Clock(), dict[str, int]()
    forgotten: list[str] = []

    async def forget(keys: list[str]) -> None:
        forgotten.extend(keys)
        for key in keys:
            kept.pop(key, None)

    d = discovery_of(server, clock, kept, forget)
    assert await d.ensure("local", llama, "real")
    for i in range(MAX_KNOWN + 10):
        await d.ensure("local", llama, f"made-up-{i}")
        if i % 1000 == 0:
            assert d.found.get("local", "real") is not None  # in use: never the one dropped
    assert d.found.count("local") == MAX_KNOWN and len(kept) == MAX_KNOWN
    assert "real" in (d.found.items()["local"]) and len(forgotten) == 11
    assert await d.ensure("local", llama, "new-one")  # still asked


@pytest.fixture
def no_summarizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summarizer never reaches a network: the proxy's compactions keep the end verbatim."""

    async def complete(self: LLMSummarizer, *args: Any) -> str:
        raise SummarizerFailed("down")

    monkeypatch.setattr(LLMSummarizer, "complete", complete)


COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAopaque"}


def compacting_upstream(request: httpx.Request) -> httpx.Response:
    """An upstream that compacts, and refuses a field it does not know, as OpenAI does."""
    payload = orjson.loads(request.content)
    if "bogus" in payload:
        message = "Unknown parameter: 'bogus'."
        error = {"message": message, "type": "invalid_request_error", "code": "unknown_parameter"}
        return httpx.Response(400, json={"error": error})
    body = {"id": "resp_1", "object": "response", "status": "completed", "output": [COMPACTION]}
    return httpx.Response(200, json={**body, "model": payload["model"]})


def teams_config(data: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for name, value in (("A_KEY", "cw-a"), ("B_KEY", "cw-b"), ("ADMIN", "cw-admin")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("UP_KEY", "sk-up")
    return {
        "data_dir": data,
        "upstreams": {"u": {"base_url": BASE, "api_key_env": "UP_KEY"}},
        "default_upstream": "u",
        "auth": "keys",
        "admin_key_env": "ADMIN",
        "teams": {"a": {"key_envs": ["A_KEY"]}, "b": {"key_envs": ["B_KEY"]}},
    }


def compaction_request(**extra: Any) -> dict[str, Any]:
    items = [{"role": "user", "content": "read the logs"}, {"type": "compaction_trigger"}]
    return {"model": "gpt-4.1", "input": items, **extra}


@respx.mock
async def test_one_malformed_compaction_switches_no_teams_compactions_to_the_proxy(
    monkeypatch: pytest.MonkeyPatch, no_summarizer: None
) -> None:
    # F3: an upstream 400 for an unrelated reason (an unknown field) was read as "this
    # upstream does not compact", stored for every team: the proxy then answered every team's
    # compactions with its own summaries on the operator's key.
    responses = respx.post(f"{BASE}/responses").mock(side_effect=compacting_upstream)
    a, b = {"authorization": "Bearer cw-a"}, {"authorization": "Bearer cw-b"}
    admin = {"authorization": "Bearer cw-admin"}
    with tempfile.TemporaryDirectory() as data:
        async with _running(teams_config(data, monkeypatch)) as client:
            await client.post("/v1/responses", json=compaction_request(bogus=1), headers=a)
            theirs = await client.post("/v1/responses", json=compaction_request(), headers=b)
            mine = await client.post("/v1/responses", json=compaction_request(), headers=a)
            listed = (await client.get("/admin/learned-capabilities", headers=admin)).json()
    assert theirs.status_code == 200 and theirs.json()["output"] == [COMPACTION]
    assert mine.status_code == 200 and mine.json()["output"] == [COMPACTION]
    assert len(responses.calls) == 3  # every one asked of the upstream
    assert listed == {"compaction_served": {}}


@respx.mock
async def test_an_explicit_not_supported_is_learned_for_its_team_alone_and_can_be_reset(
    monkeypatch: pytest.MonkeyPatch, no_summarizer: None
) -> None:
    # F3: learned per caller scope, listed and reset by the admin API.
    def answer(request: httpx.Request) -> httpx.Response:
        if b'"a-marker"' in request.content:
            return httpx.Response(501, json={"error": {"message": "Not Implemented"}})
        return compacting_upstream(request)

    responses = respx.post(f"{BASE}/responses").mock(side_effect=answer)
    a, b = {"authorization": "Bearer cw-a"}, {"authorization": "Bearer cw-b"}
    admin = {"authorization": "Bearer cw-admin"}
    marked = compaction_request(metadata={"who": "a-marker"})
    with tempfile.TemporaryDirectory() as data:
        async with _running(teams_config(data, monkeypatch)) as client:
            await client.post("/v1/responses", json=marked, headers=a)  # learned for a
            await client.post("/v1/responses", json=marked, headers=a)  # not asked again
            theirs = await client.post("/v1/responses", json=compaction_request(), headers=b)
            listed = (await client.get("/admin/learned-capabilities", headers=admin)).json()
            gone = await client.delete("/admin/learned-capabilities/a/u", headers=admin)
            again = await client.delete("/admin/learned-capabilities/a/u", headers=admin)
            await client.post("/v1/responses", json=marked, headers=a)  # asked again
    assert theirs.json()["output"] == [COMPACTION]
    assert listed == {"compaction_served": {"a": ["u"]}}
    assert gone.status_code == 200 and again.status_code == 404
    assert again.json()["error"]["message"].startswith("nothing was learned")
    assert len(responses.calls) == 3


class WindowedUpstream:
    """A chat upstream of ``window`` prompt tokens (o200k, text parts) whose overflow states
    no figures; a file part reads as 50,000 tokens (a PDF the proxy cannot count)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.sent: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        payload = orjson.loads(request.content)
        responses = "input" in payload
        encoding = get_encoding("o200k_base")
        n = 0
        for m in payload["input"] if responses else payload["messages"]:
            parts = m["content"] if isinstance(m["content"], list) else [m["content"]]
            for p in parts:
                if isinstance(p, dict) and p.get("type") in ("file", "input_file"):
                    n += 50_000
                else:
                    text = p if isinstance(p, str) else p.get("text", "")
                    n += 4 + len(encoding.encode_ordinary(text))
        self.sent.append(n)
        if n > self.window:
            return no_figures(n)
        if responses:
            said = [{"type": "output_text", "text": "ok"}]
            output = [{"type": "message", "role": "assistant", "content": said}]
            usage = {"input_tokens": n, "output_tokens": 1, "total_tokens": n + 1}
            body = {"id": "r", "object": "response", "status": "completed", "output": output}
            return httpx.Response(200, json={**body, "model": "m", "usage": usage})
        usage = {"prompt_tokens": n, "completion_tokens": 1, "total_tokens": n + 1}
        choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}}
        return httpx.Response(200, json={"id": "c", "choices": [choice], "usage": usage})


def learning_config(data: str, monkeypatch: pytest.MonkeyPatch, **trimming: Any) -> dict[str, Any]:
    return {
        **config(data, monkeypatch, discovery="off"),
        "models": {"m": {"context_window": 30_000, "tokenizer": "o200k_base"}},
        "trimming": {"max_overflow_retries": 1, **trimming},
    }


def asking(words: int, file: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "word " * words}]
    if file:
        content.append({"type": "file", "file": {"file_id": "file-abc123"}})
    return {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 50}


def asking_responses(words: int, file: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "input_text", "text": "word " * words}]
    if file:
        content.append({"type": "input_file", "file_id": "file-abc123"})
    item = {"role": "user", "content": content}
    return {"model": "m", "input": [item], "max_output_tokens": 50}


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
@respx.mock
async def test_a_file_the_proxy_cannot_count_shrinks_no_window(
    monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    # F2: an input file by id made the proxy's count tiny; its figure-free overflow was learned
    # at that count (the team's window set to ~100, every later request refused locally, kept
    # across restarts, never healed).
    upstream = WindowedUpstream(8000)
    respx.post(f"{BASE}{path}").mock(side_effect=upstream)
    ask = asking if path == "/chat/completions" else asking_responses
    with tempfile.TemporaryDirectory() as data:
        async with _running(learning_config(data, monkeypatch)) as client:
            ordinary = await client.post(f"/v1{path}", json=ask(2000))
            with_file = await client.post(f"/v1{path}", json=ask(20, file=True))
            later = [await client.post(f"/v1{path}", json=ask(2000)) for _ in range(3)]
    assert ordinary.status_code == 200
    assert with_file.status_code == 400  # the upstream's own refusal, relayed
    assert [r.status_code for r in later] == [200, 200, 200], later[0].text
    assert len(upstream.sent) >= 5  # every later request reached the upstream


@respx.mock
async def test_a_learned_window_is_tried_again_and_a_refusal_on_it_says_how_to_forget_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # F2 / item 2: a learned window only went down, forever; the proxy refused each request
    # itself ("window 17543") after the upstream's window grew, and did not say the window was
    # learned. Now one held-back request is let through after a while and heals the lesson.
    upstream = WindowedUpstream(3000)
    respx.post(f"{BASE}/chat/completions").mock(side_effect=upstream)
    trimming = {"learned_retry_requests": 3, "learned_retry_seconds": 0}
    with tempfile.TemporaryDirectory() as data:
        async with _running(learning_config(data, monkeypatch, **trimming)) as client:
            first = await client.post("/v1/chat/completions", json=asking(4000))
            upstream.window = 24_000  # the provider raised its window
            held = [await client.post("/v1/chat/completions", json=asking(4000)) for _ in range(2)]
            through = await client.post("/v1/chat/completions", json=asking(4000))
            after = await client.post("/v1/chat/completions", json=asking(4000))
    assert first.status_code == 400  # the upstream's refusal: the window is learned below it
    for refused in held:
        assert refused.status_code == 400
        message = refused.json()["error"]["message"]
        assert "learned from the upstream's overflow errors at" in message
        assert "contextwarden windows forget m --team default" in message
        assert "DELETE /admin/learned-windows/default/m" in message
    assert through.status_code == 200
    assert "learned-window-retried" in through.headers["x-contextwarden-actions"]
    assert after.status_code == 200  # healed: no longer held back
    assert "learned-window-retried" not in after.headers["x-contextwarden-actions"]


def test_the_cli_lists_and_forgets_what_was_learned_without_the_admin_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The quick start has no admin API: a learned window and a learned capability are
    # forgotten in the store itself.
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path}\n")
    store = open_store(load_settings(str(path)))

    async def seed() -> None:
        await store.put_learned_window("default\tm", 17_543)
        await store.put_setting("bounds-refused\tdefault~abc\tm", 20_000)
        await store.put_setting("learned-at\tdefault\tm", 1_795_000_000)
        await store.put_setting("compaction-served\tdefault\tu", 1)
        await store.put_setting("discovered\tu\tm", 32_768)

    asyncio.run(seed())
    assert main(["windows", "list", "--config", str(path)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == {
        "default": {"m": {"window": 17_543, "learned_at": 1_795_000_000}},
        "default~abc": {"m": {"refused": 20_000}},
    }
    assert main(["windows", "forget", "m", "--team", "default", "--config", str(path)]) == 0
    assert main(["windows", "forget", "m", "--team", "default", "--config", str(path)]) == 1
    assert main(["capabilities", "list", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1]) == {"default": ["u"]}
    assert main(["capabilities", "forget", "default", "u", "--config", str(path)]) == 0
    left = asyncio.run(store.learned_windows())
    assert left == {"bounds-refused\tdefault~abc\tm": 20_000, "discovered\tu\tm": 32_768}


def test_listing_where_nothing_was_stored_makes_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user's try: ``contextwarden windows list`` in a directory with no store made one
    (``./.contextwarden/checkpoints.sqlite3``): a list writes nothing."""
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n")
    assert main(["windows", "list", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {}
    assert main(["windows", "forget", "m", "--config", str(path)]) == 1
    assert main(["capabilities", "list", "--config", str(path)]) == 0
    assert not (tmp_path / "data").exists()
