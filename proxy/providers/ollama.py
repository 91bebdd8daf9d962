"""Ollama: ``/api/ps`` and ``/api/show`` state a model's context.

    Ollama         ``GET /api/ps``: ``models[].context_length``, what the loaded model was given;
                   else ``POST /api/show``: ``num_ctx`` in ``parameters`` (the Modelfile's),
                   else ``<architecture>.context_length`` in ``model_info`` (what it was trained
                   for), which the server caps by its default context (``OLLAMA_CONTEXT_LENGTH``,
                   or 4k to 256k by the GPU's memory): provisional, read again once loaded

Its list names it nowhere: under ``auto`` it is asked in turn (before LM Studio).
"""

from __future__ import annotations

import re

from proxy.providers.local import local_server
from proxy.providers.probing import LOAD_DEFAULT, Asking, Said, objects

NUM_CTX = re.compile(r"^num_ctx\s+(\S+)", re.MULTILINE)


async def probe(asking: Asking, model: str) -> Said | None:
    names = {model, f"{model}:latest"} if ":" not in model else {model}
    running = await asking.get("GET", f"{asking.root}/api/ps", None)
    if not isinstance(running, dict) or not isinstance(running.get("models"), list):
        return None  # not Ollama
    for loaded in objects(running["models"]):
        if {loaded.get("name"), loaded.get("model")} & names:
            window = asking.figure(loaded.get("context_length"))
            if window:
                return Said(
                    window=window,
                    server="Ollama",
                    field="/api/ps context_length of the loaded model",
                )
    shown = await asking.get("POST", f"{asking.root}/api/show", {"model": model})
    if not isinstance(shown, dict):
        return None
    parameters = shown.get("parameters")
    found = NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    stated = asking.sane(found.group(1)) if found else None  # digits past the range: None
    if stated:
        return Said(window=stated, server="Ollama", field="/api/show num_ctx in parameters")
    info = shown.get("model_info")
    trained = [
        asking.figure(v) for k, v in (info or {}).items() if str(k).endswith(".context_length")
    ]
    window = min((t for t in trained if t), default=None)
    if not window:
        return None
    field = f"/api/show model_info context_length {window}, capped by the server's default"
    return Said(window=min(window, LOAD_DEFAULT), server="Ollama", field=field, provisional=True)


PROVIDER = local_server("ollama", probe, turn=3)
