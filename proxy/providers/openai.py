"""OpenAI's API and every OpenAI-compatible server: chat and Responses, a bearer key, the
legacy completions; window discovery asks it (its local servers refine it: ``local``). vLLM
and llama.cpp serve Messages too: a config says so with ``apis:``."""

from __future__ import annotations

from proxy.providers.base import Provider

PROVIDER = Provider(
    kind="openai",
    apis=("chat_completions", "responses"),
    model_list="merged",
    serves_completions=True,
    discovers=True,
    # OpenAI's server-side compaction (Responses' context_management) is served by its own API
    # (and Azure's); strict servers refuse the field.
    hosts=("api.openai.com", ".openai.azure.com"),
    context_api="responses",
)
