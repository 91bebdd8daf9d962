"""Shared fixtures: tiktoken from litellm's bundled files, never the network."""

from __future__ import annotations

from proxy.config.environment import prepare_environment
from proxy.windows.tokenizers import get_encoding

prepare_environment()
O200K = get_encoding("o200k_base")
CL100K = get_encoding("cl100k_base")
