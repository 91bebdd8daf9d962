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
        return cls(settings, client, build_models(settings))

    def api_key(self, upstream: str) -> str | None:
        return self.settings.api_key(upstream)


def build_models(settings: Settings) -> Models:
    use_bundled_tiktoken_files()
    return Models(settings, ModelTable.bundled(), Tokenizers(settings.trimming.estimate_ratio))
