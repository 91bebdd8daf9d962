"""The process's environment, prepared once before anything imports litellm or tiktoken.

Both are told to use the files they ship with, never the network: tiktoken's encodings come
from litellm's bundled copy, and litellm's model and price table from its local file. An
operator's own setting of either variable wins.
"""

from __future__ import annotations

import os

from proxy.windows.modeltable import litellm_dir


def prepare_environment() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    base = litellm_dir()
    if base is not None:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(base / "litellm_core_utils" / "tokenizers"))
