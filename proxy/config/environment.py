"""The process's environment, prepared once before anything imports litellm or tiktoken.

Both are told to use the files they ship with, never the network: tiktoken's encodings come
from litellm's bundled copy, and litellm's model and price table from its local file. An
operator's own setting of either variable wins.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def litellm_dir() -> Path | None:
    """Where litellm is installed (its bundled tokenizers and model table live there)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def prepare_environment() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    base = litellm_dir()
    if base is not None:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(base / "litellm_core_utils" / "tokenizers"))
