"""LM Studio: ``/api/v0/models/{model}`` states the loaded (or the largest) context."""

from __future__ import annotations

from proxy.providers.local import local_server

PROVIDER = local_server("lmstudio", probe="lmstudio")
