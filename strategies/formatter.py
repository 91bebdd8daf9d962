"""Formatters: merge a block's messages into the system message (contexty's InjectIntoSystem).

``xml`` appends ``<context>`` with one escaped ``<fact>`` per text fragment; ``markdown`` appends a
bulleted list. With no facts the system message is returned unchanged. Python's ``html.escape``
writes ``&#x27;`` and ``&quot;`` where Go's writes ``&#39;`` and ``&#34;``: same meaning.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Literal

from strategies.messages import Message, iter_text

FormatterName = Literal["xml", "markdown"]


def facts_of(messages: Sequence[Message]) -> list[str]:
    return [text for m in messages for text in iter_text(m) if text]


def format_facts(facts: Sequence[str], kind: FormatterName) -> str:
    if kind == "markdown":
        return "\n".join(f"- {fact}" for fact in facts)
    inner = "".join(f"  <fact>{html.escape(fact)}</fact>\n" for fact in facts)
    return f"<context>\n{inner}</context>"


def inject_into_system(system: Message, facts: Sequence[str], kind: FormatterName) -> Message:
    """The system message with ``facts`` appended; unchanged when there are none."""
    if not facts:
        return system
    text = format_facts(facts, kind)
    content = system.get("content")
    if isinstance(content, list):
        return {**system, "content": [*content, {"type": "text", "text": "\n\n" + text}]}
    base = content if isinstance(content, str) else ""
    return {**system, "content": f"{base}\n\n{text}" if base else text}
