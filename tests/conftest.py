"""Shared fixtures: tiktoken from litellm's bundled files, never the network."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from proxy.tokenizers import get_encoding, use_bundled_tiktoken_files

use_bundled_tiktoken_files()
O200K = get_encoding("o200k_base")
CL100K = get_encoding("cl100k_base")
