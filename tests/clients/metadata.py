"""The metadata endpoints of the local servers, answering exactly as each server's own source
defines them, for a fake upstream to serve beside its model endpoints:

- Ollama (server/routes.go ``PsHandler``, ``ShowHandler``; api/types.go): ``GET /api/ps``
  lists the loaded models with ``context_length``; ``POST /api/show`` gives ``parameters``
  (each Modelfile option as ``fmt.Sprintf("%-*s %#v", 30, key, value)``) and ``model_info``
  (``<architecture>.context_length``: the trained length); ``GET /v1/models`` its list.
- llama.cpp's llama-server (tools/server, ``get_props``): ``GET /props`` with
  ``default_generation_settings.n_ctx`` (a slot's context) and ``total_slots``; ``GET
  /v1/models`` with ``owned_by: llamacpp`` and the trained length in ``meta.n_ctx_train``.
- vLLM (vllm/entrypoints/openai/models/serving.py ``show_available_models``, ``ModelCard``):
  ``GET /v1/models`` with ``max_model_len``.
- LM Studio (REST API v0): ``GET /api/v0/models/{model}`` with ``state``,
  ``max_context_length`` and, loaded, ``loaded_context_length``; ``GET /v1/models`` its list.

``loaded``: whether the model is loaded yet (Ollama and LM Studio size a model's context when
they load it; before, they state what it may take).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TRAINED = 131072  # the model's trained context length, as its GGUF states it
KINDS = ("ollama", "llama.cpp", "vllm", "lmstudio")


class Metadata:
    """One local server's metadata about one model whose window is ``window``."""

    def __init__(self, kind: str, model: str, window: int, loaded: bool = True) -> None:
        assert kind in KINDS, kind
        self.kind, self.model, self.window, self.loaded = kind, model, window, loaded
        self.asked: list[str] = []  # each metadata path asked, in order

    def routes(self) -> list[Route]:
        own = {
            "ollama": [
                Route("/api/ps", self.ollama_ps, methods=["GET"]),
                Route("/api/show", self.ollama_show, methods=["POST"]),
            ],
            "llama.cpp": [Route("/props", self.llamacpp_props, methods=["GET"])],
            "vllm": [],
            "lmstudio": [Route("/api/v0/models/{model:path}", self.lmstudio, methods=["GET"])],
        }[self.kind]
        return [*own, Route("/v1/models", self.models, methods=["GET"])]

    def _seen(self, request: Request) -> None:
        self.asked.append(request.url.path)

    async def models(self, request: Request) -> Response:
        self._seen(request)
        created = int(time.time())
        card: dict[str, Any] = {"id": self.model, "object": "model", "created": created}
        if self.kind == "vllm":
            card |= {"owned_by": "vllm", "root": self.model, "parent": None}
            card |= {"max_model_len": self.window, "permission": [_permission(created)]}
        elif self.kind == "llama.cpp":
            card |= {"owned_by": "llamacpp", "meta": {"vocab_type": 2, "n_vocab": 128256}}
            card["meta"] |= {"n_ctx_train": TRAINED, "n_embd": 4096, "n_params": 8030261248}
        elif self.kind == "ollama":
            card |= {"owned_by": "library"}
        else:
            card |= {"owned_by": "organization_owner"}
        return JSONResponse({"object": "list", "data": [card]})

    async def ollama_ps(self, request: Request) -> Response:
        self._seen(request)
        if not self.loaded:
            return JSONResponse({"models": []})
        loaded = {
            "name": self.model,
            "model": self.model,
            "size": 6654289920,
            "digest": "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
            "details": _ollama_details(),
            "expires_at": "2099-01-01T00:05:00.000000000Z",
            "size_vram": 6654289920,
            "context_length": self.window,
        }
        return JSONResponse({"models": [loaded]})

    async def ollama_show(self, request: Request) -> Response:
        self._seen(request)
        asked = (await request.json()).get("model")
        if asked not in (self.model, self.model.removesuffix(":latest")):
            return JSONResponse({"error": f"model '{asked}' not found"}, 404)
        options = {"num_ctx": self.window, "stop": "<|eot_id|>"}
        parameters = "\n".join(f"{k:<30} {_go_value(v)}" for k, v in options.items())
        info = {"general.architecture": "llama", "llama.context_length": TRAINED}
        return JSONResponse(
            {
                "license": "LLAMA 3.1 COMMUNITY LICENSE AGREEMENT",
                "modelfile": f"FROM {self.model}\nPARAMETER num_ctx {self.window}\n",
                "parameters": parameters,
                "template": "{{ .Prompt }}",
                "details": _ollama_details(),
                "model_info": info,
                "capabilities": ["completion", "tools"],
                "modified_at": "2025-01-01T00:00:00Z",
            }
        )

    async def llamacpp_props(self, request: Request) -> Response:
        self._seen(request)
        settings = {"params": {"n_predict": -1, "temperature": 0.8}, "n_ctx": self.window}
        return JSONResponse(
            {
                "default_generation_settings": settings,
                "total_slots": 4,
                "model_alias": self.model,
                "model_path": f"/models/{self.model}.gguf",
                "modalities": {"vision": False, "audio": False},
                "endpoint_slots": True,
                "endpoint_props": False,
                "endpoint_metrics": False,
                "chat_template": "{{ messages }}",
                "build_info": "b6000-0000000",
            }
        )

    async def lmstudio(self, request: Request) -> Response:
        self._seen(request)
        if request.path_params["model"] != self.model:
            return JSONResponse({"error": "Model not found"}, 404)
        data = {
            "id": self.model,
            "object": "model",
            "type": "llm",
            "publisher": "lmstudio-community",
            "arch": "llama",
            "compatibility_type": "gguf",
            "quantization": "Q4_K_M",
            "state": "loaded" if self.loaded else "not-loaded",
            "max_context_length": TRAINED,
        }
        if self.loaded:
            data["loaded_context_length"] = self.window
        return JSONResponse(data)


def _ollama_details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": ["llama"],
        "parameter_size": "8.0B",
        "quantization_level": "Q4_K_M",
    }


def _permission(created: int) -> dict[str, Any]:
    return {
        "id": "modelperm-0",
        "object": "model_permission",
        "created": created,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }


def _go_value(value: object) -> str:
    """Go's ``%#v`` of an option: a string quoted, a number as is."""
    return f'"{value}"' if isinstance(value, str) else str(value)
