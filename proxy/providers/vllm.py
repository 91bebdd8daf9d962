"""vLLM and SGLang: ``/v1/models`` states ``max_model_len``."""

from __future__ import annotations

from proxy.providers.local import local_server

PROVIDER = local_server("vllm", probe="vllm")
