"""What each local server says of a model's window, and where it says it: the probes of window
discovery (proxy/windows/discovery.py), each server's fields as its own source defines them.

    vLLM, SGLang   ``GET /v1/models``: ``data[].max_model_len`` (a LoRA adapter's card has none:
                   its ``parent``'s); vllm/entrypoints/openai/models/serving.py
    llama.cpp      ``GET /props``: ``default_generation_settings.n_ctx``, a slot's context (the
                   ``-c`` total divided among the ``--parallel`` slots); tools/server
    Ollama         ``GET /api/ps``: ``models[].context_length``, what the loaded model was given;
                   else ``POST /api/show``: ``num_ctx`` in ``parameters`` (the Modelfile's),
                   else ``<architecture>.context_length`` in ``model_info`` (what it was trained
                   for), which the server caps by its default context (``OLLAMA_CONTEXT_LENGTH``,
                   or 4k to 256k by the GPU's memory): provisional, read again once loaded
    LM Studio      ``GET /api/v0/models/{model}``: ``loaded_context_length`` when loaded, else
                   ``max_context_length``, provisional likewise (a name that cannot be one
                   path segment, such as ``..`` or one with a slash, is not asked)

A probe is given ``get`` (a GET or a POST of JSON, answered with the status and the parsed JSON,
or None) and returns what it found, or None when the server is not that one or says nothing.
Every figure is held to the sane range of a window (proxy/windows/sane.py): outside it, the
server said nothing.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from proxy.windows.sane import MAX_DIGITS, sane_window

# (method, url, JSON body or None) -> the answer's JSON when its status is 200, else None.
Get = Callable[[str, str, Any], Awaitable[Any]]

# What a server that sizes a model's context at load time gives it, at least, when its config
# does not say (Ollama's least default; LM Studio's default load context).
LOAD_DEFAULT = 4096
NUM_CTX = re.compile(r"^num_ctx\s+(\S+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Said:
    """A window as one server stated it: where (``field``), and whether it may change once
    the model is loaded (``provisional``)."""

    window: int
    server: str
    field: str
    provisional: bool = False


def roots(base_url: str) -> tuple[str, str]:
    """(the OpenAI-compatible base, ending in /v1 or whatever was configured; the server's
    root, where its own API lives)."""
    base = base_url.rstrip("/")
    return base, base.removesuffix("/v1")


async def probe_vllm(get: Get, base: str, root: str, model: str) -> Said | None:
    data = await get("GET", f"{base}/models", None)
    cards = _list(data.get("data")) if isinstance(data, dict) else []
    by_id = {c.get("id"): c for c in cards}
    card = by_id.get(model)
    if card is not None and card.get("max_model_len") is None and card.get("parent"):
        card = by_id.get(card["parent"])
    window = _int(card.get("max_model_len")) if card is not None else None
    owner = card.get("owned_by") if card is not None else None
    server = "SGLang" if owner == "sglang" else "vLLM"
    return Said(window, server, "/v1/models max_model_len") if window else None


async def probe_llamacpp(get: Get, base: str, root: str, model: str) -> Said | None:
    data = await get("GET", f"{root}/props?model={quote(model, safe='')}", None)
    settings = data.get("default_generation_settings") if isinstance(data, dict) else None
    window = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    field = "/props default_generation_settings.n_ctx (a slot's context)"
    return Said(window, "llama.cpp", field) if window else None


async def probe_ollama(get: Get, base: str, root: str, model: str) -> Said | None:
    names = {model, f"{model}:latest"} if ":" not in model else {model}
    running = await get("GET", f"{root}/api/ps", None)
    if not isinstance(running, dict) or not isinstance(running.get("models"), list):
        return None  # not Ollama
    for loaded in _list(running["models"]):
        if {loaded.get("name"), loaded.get("model")} & names:
            window = _int(loaded.get("context_length"))
            if window:
                return Said(window, "Ollama", "/api/ps context_length of the loaded model")
    shown = await get("POST", f"{root}/api/show", {"model": model})
    if not isinstance(shown, dict):
        return None
    parameters = shown.get("parameters")
    found = NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    stated = sane_window(found.group(1)[: MAX_DIGITS + 1]) if found else None
    if stated:
        return Said(stated, "Ollama", "/api/show num_ctx in parameters")
    info = shown.get("model_info")
    trained = [_int(v) for k, v in (info or {}).items() if str(k).endswith(".context_length")]
    window = min((t for t in trained if t), default=None)
    if not window:
        return None
    field = f"/api/show model_info context_length {window}, capped by the server's default"
    return Said(min(window, LOAD_DEFAULT), "Ollama", field, provisional=True)


async def probe_lmstudio(get: Get, base: str, root: str, model: str) -> Said | None:
    segment = path_segment(model)
    if segment is None:
        return None
    data = await get("GET", f"{root}/api/v0/models/{segment}", None)
    if not isinstance(data, dict):
        return None
    loaded = _int(data.get("loaded_context_length"))
    if data.get("state") == "loaded" and loaded:
        return Said(loaded, "LM Studio", "/api/v0/models loaded_context_length")
    most = _int(data.get("max_context_length"))
    if not most:
        return None
    field = f"/api/v0/models max_context_length {most}, not loaded yet"
    return Said(min(most, LOAD_DEFAULT), "LM Studio", field, provisional=True)


PROBES = {
    "vllm": probe_vllm,
    "llama.cpp": probe_llamacpp,
    "ollama": probe_ollama,
    "lmstudio": probe_lmstudio,
}


async def probe(get: Get, base_url: str, model: str, server: str = "auto") -> Said | None:
    """What the server at ``base_url`` says of ``model``'s window: ``server`` names which
    probe asks it (its provider's, proxy/providers/), or ``auto`` asks each in turn (the
    OpenAI-compatible list first: vLLM and SGLang state the window there, and llama.cpp names
    itself there)."""
    base, root = roots(base_url)
    if server != "auto":
        return await PROBES[server](get, base, root, model)
    listed = await get("GET", f"{base}/models", None)
    cards = _list(listed.get("data")) if isinstance(listed, dict) else []
    if any("max_model_len" in c for c in cards):
        return await probe_vllm(_answered(get, f"{base}/models", listed), base, root, model)
    if any(c.get("owned_by") == "llamacpp" for c in cards):
        return await probe_llamacpp(get, base, root, model)
    return await probe_ollama(get, base, root, model) or await probe_lmstudio(
        get, base, root, model
    )


def _answered(get: Get, url: str, data: Any) -> Get:
    """``get``, with ``url``'s answer already in hand."""

    async def again(method: str, asked: str, body: Any) -> Any:
        return data if method == "GET" and asked == url else await get(method, asked, body)

    return again


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    """A JSON figure a server stated, as a window: a number within the sane range, else None."""
    return None if isinstance(value, str) else sane_window(value)


def path_segment(model: str) -> str | None:
    """``model`` as one URL path segment, percent-encoded; None for a name that cannot be one
    whatever the encoding (a server may decode ``%2F`` or resolve ``..``): a dot segment, a
    slash or backslash, a control character, or nothing."""
    if model in ("", ".", "..") or any(c in model for c in "/\\") or not model.isprintable():
        return None
    return quote(model, safe="")
