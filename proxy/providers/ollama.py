"""Ollama: ``/api/ps`` and ``/api/show`` state a model's context."""

from __future__ import annotations

from proxy.providers.local import local_server

PROVIDER = local_server("ollama", probe="ollama")
