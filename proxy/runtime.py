"""The long-lived objects of one running proxy, built once and passed explicitly."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from proxy.config import Settings
from proxy.models import Models
from proxy.modeltable import ModelTable
from proxy.tokenizers import Tokenizers, use_bundled_tiktoken_files


@dataclass(slots=True)
class Runtime:
    settings: Settings
    client: httpx.AsyncClient
    models: Models

    @classmethod
    def build(cls, settings: Settings, client: httpx.AsyncClient) -> Runtime:
        use_bundled_tiktoken_files()
        tokenizers = Tokenizers(settings.trimming.estimate_ratio)
        models = Models(settings, ModelTable.bundled(), tokenizers)
        return cls(settings, client, models)

    def api_key(self, upstream: str) -> str | None:
        return self.settings.api_key(upstream)
