"""What the demo upstream needs of its own, so that it stands where a provider stands: it
imports nothing of the product (tests/test_demo_boundary.py holds it). A check the proxy makes
and the upstream makes the same way would test the proxy against itself; these are written
apart, from the providers' documented behaviour.

    encoding           a tiktoken encoding, from litellm's bundled files (never the network)
    anthropic_pairs    Anthropic's rule for tool calls and results, in the API's words
    SUMMARIZER_MARK    how the upstream tells the proxy's summary requests apart
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import tiktoken

# The first words of the system prompt of the proxy's summarizer: what the proxy sends, as an
# upstream sees it (tests/test_demo_boundary.py checks it against the prompt itself).
SUMMARIZER_MARK = "You are a context summarization assistan"


def encoding(name: str) -> tiktoken.Encoding:
    """``name``'s encoding from the copy litellm ships (an operator's TIKTOKEN_CACHE_DIR wins)."""
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        base = Path(next(iter(spec.submodule_search_locations)))
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(base / "litellm_core_utils" / "tokenizers"))
    return tiktoken.get_encoding(name)


def anthropic_pairs(messages: Any) -> str | None:
    """The Messages API's check, in its words: every ``tool_use`` is answered first thing in
    the next message, and every ``tool_result`` answers a call of the message before."""
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    calls: list[str] = []
    for i, m in enumerate(messages):
        blocks = m.get("content") if isinstance(m, dict) else None
        blocks = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
        results = []
        for b in blocks:
            if b.get("type") != "tool_result":
                break
            results.append(b.get("tool_use_id"))
        missing = [c for c in calls if c not in results]
        if missing:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        for k, b in enumerate(blocks):
            if b.get("type") == "tool_result" and b.get("tool_use_id") not in calls:
                return (
                    f"messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {b.get('tool_use_id')}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
        role = m.get("role") if isinstance(m, dict) else None
        calls = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        if role != "assistant":
            calls = []
    if calls:
        return (
            f"messages.{len(messages)}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(calls)}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )
    return None
