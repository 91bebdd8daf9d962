"""proxy/windows/servers.py and the local servers' probes (proxy/providers/): what each local
server says of a model's window, read from fake servers that answer as each server's own source
defines (tests/clients/metadata.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from proxy.providers.probing import LOAD_DEFAULT
from proxy.providers.registry import SERVERS
from proxy.windows.servers import Get, probe
from tests.clients.metadata import KINDS, TRAINED, Metadata

BASE = "http://local.test/v1"
MODEL = "qwen2.5-coder:7b"


def getter(app: Starlette) -> Get:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))

    async def get(method: str, url: str, body: Any) -> Any:
        response = await client.request(method, url, json=body)
        return response.json() if response.status_code == 200 else None

    return get


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("server", ["auto", "named"])
async def test_each_server_states_the_window_where_its_source_says(kind: str, server: str) -> None:
    meta = Metadata(kind, MODEL, 12_288)
    own = SERVERS[kind].probe if server == "named" else None
    said = await probe(getter(Starlette(routes=meta.routes())), BASE, MODEL, own)
    assert said is not None
    assert said.window == 12_288 and not said.provisional
    expected = {
        "ollama": "/api/ps",
        "llama.cpp": "/props",
        "vllm": "/v1/models",
        "lmstudio": "/api/v0/models",
    }
    assert said.field.startswith(expected[kind])
    if server == "named" and kind != "vllm":
        assert "/v1/models" not in meta.asked  # only that server's own endpoints


async def test_a_model_ollama_has_not_loaded_is_read_from_its_modelfile() -> None:
    meta = Metadata("ollama", MODEL, 8192, loaded=False)
    said = await probe(getter(Starlette(routes=meta.routes())), BASE, MODEL)
    assert said is not None and said.window == 8192 and not said.provisional
    assert meta.asked == ["/v1/models", "/api/ps", "/api/show"]


async def test_without_num_ctx_ollama_gives_the_trained_length_capped_and_provisional() -> None:
    async def ps(request: Any) -> JSONResponse:
        return JSONResponse({"models": []})

    async def show(request: Any) -> JSONResponse:
        info = {"general.architecture": "qwen2", "qwen2.context_length": TRAINED}
        return JSONResponse(
            {"parameters": 'stop                           "<|im_end|>"', "model_info": info}
        )

    app = Starlette(routes=[Route("/api/ps", ps), Route("/api/show", show, methods=["POST"])])
    said = await probe(getter(app), BASE, MODEL, SERVERS["ollama"].probe)
    assert said is not None and said.provisional and said.window == LOAD_DEFAULT
    assert str(TRAINED) in said.field


async def test_a_model_lm_studio_has_not_loaded_is_provisional() -> None:
    meta = Metadata("lmstudio", MODEL, 16_384, loaded=False)
    said = await probe(getter(Starlette(routes=meta.routes())), BASE, MODEL)
    assert said is not None and said.provisional and said.window == LOAD_DEFAULT


async def test_ollama_names_a_model_without_its_tag_latest() -> None:
    meta = Metadata("ollama", "llama3.2:latest", 4096)
    said = await probe(getter(Starlette(routes=meta.routes())), BASE, "llama3.2")
    assert said is not None and said.window == 4096


async def test_a_vllm_lora_adapter_takes_its_base_models_length() -> None:
    async def models(request: Any) -> JSONResponse:
        base = {
            "id": "meta-llama/Llama-3.1-8B",
            "object": "model",
            "owned_by": "vllm",
            "max_model_len": 32768,
        }
        lora = {
            "id": "sql-lora",
            "object": "model",
            "owned_by": "vllm",
            "parent": base["id"],
            "max_model_len": None,
        }
        return JSONResponse({"object": "list", "data": [base, lora]})

    said = await probe(getter(Starlette(routes=[Route("/v1/models", models)])), BASE, "sql-lora")
    assert said is not None and said.window == 32768


async def test_a_server_that_states_nothing_says_nothing() -> None:
    async def models(request: Any) -> JSONResponse:  # OpenAI's list: no lengths
        card = {"id": "gpt-4.1", "object": "model", "created": 0, "owned_by": "system"}
        return JSONResponse({"object": "list", "data": [card]})

    app = Starlette(routes=[Route("/v1/models", models)])
    assert await probe(getter(app), BASE, "gpt-4.1") is None
    assert await probe(getter(Starlette()), BASE, "gpt-4.1") is None  # 404s everywhere


async def test_under_auto_the_server_the_list_names_is_the_one_asked() -> None:
    """The declared order: a card stating ``max_model_len`` is vLLM's before one owned by
    llamacpp is llama.cpp's; a server the list names is asked alone, never the others after
    it."""
    asked: list[str] = []

    def route(path: str, answer: Any, methods: list[str] | None = None) -> Route:
        async def endpoint(request: Any) -> JSONResponse:
            asked.append(path)
            return JSONResponse(answer)

        return Route(path, endpoint, methods=methods or ["GET"])

    both = {"id": "m", "owned_by": "llamacpp", "max_model_len": 8192}
    ps = {"models": [{"name": "m", "context_length": 4096}]}
    app = Starlette(routes=[route("/v1/models", {"data": [both]}), route("/api/ps", ps)])
    said = await probe(getter(app), BASE, "m")
    assert said is not None and said.server == "vLLM" and said.window == 8192
    assert asked == ["/v1/models"]  # asked once: the list's answer is handed to vLLM's probe

    asked.clear()
    llamacpp = {"id": "m", "owned_by": "llamacpp"}
    app = Starlette(routes=[route("/v1/models", {"data": [llamacpp]}), route("/api/ps", ps)])
    assert await probe(getter(app), BASE, "m") is None  # /props says nothing: Ollama not asked
    assert asked == ["/v1/models"]
