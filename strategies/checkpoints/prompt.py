"""The summarizer's prompt, as text: instructions, sections, and the conversation serialized.

Old messages are serialized as labelled lines inside ``<conversation>``, tool results cut to
2000 characters with a note; the prompt's own tags are defused inside quoted text. The summary
has fixed sections; an update prompt extends a previous summary instead of re-reading
everything; a split turn's beginning gets a prompt of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from strategies.messages import Message, called_functions, iter_text, role

TOOL_RESULT_CHARS = 2000
SPLIT_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
NO_HISTORY = "No prior history."
# Our prompt's own tags, neutralised inside quoted text so that no message can close them.
_TAGS = re.compile(
    r"<(\s*/?\s*(?:conversation|previous-summary|read-files|modified-files)\b)", re.IGNORECASE
)

SYSTEM_PROMPT = (
    "You are a context summarization assistant. Read the conversation between a user and an AI "
    "assistant and produce a structured summary that lets another assistant continue the work "
    "without the original messages. Do not continue the conversation; only summarize it."
)

SECTIONS = """Use exactly this format:

## Goal
What the user is trying to accomplish.

## Constraints & Preferences
Every requirement, rule and preference the user stated, copied verbatim as a quoted line each
(never paraphrased; those of the previous summary kept), or "(none)".

## Progress
### Done
- [x] Completed work
### In Progress
- [ ] Work under way
### Blocked
- Anything blocked, and why

## Key Decisions
- **Decision**: rationale

## Next Steps
1. What should happen next, in order

## Critical Context
Anything else needed to continue.

Keep exact file paths, function names, identifiers and error messages."""

INITIAL_PROMPT = "Summarize the conversation above.\n\n" + SECTIONS

UPDATE_PROMPT = (
    "The conversation above continues from the previous summary in <previous-summary>. Update "
    "that summary with the new messages: preserve and extend the goal and constraints, move "
    "items from In Progress to Done when they were finished, refresh Blocked and Next Steps, and "
    "keep every detail of the previous summary that still matters.\n\n" + SECTIONS
)

LAYER_PROMPT = (
    "The conversation above continues from the earlier summary in <previous-summary>, which "
    "stays in place, word for word, before yours. Summarize only the new messages, so that the "
    "earlier summary followed by yours covers everything: do not repeat what it says; state "
    "what changed (a decision replaced, a task finished, a constraint added), naming what it "
    "replaces.\n\n" + SECTIONS
)

TURN_PREFIX_PROMPT = """The conversation above is the beginning of a turn that is still in \
progress; its end is kept verbatim. Summarize this beginning so the end makes sense:

## Original Request
What the user asked for in this turn.

## Early Progress
What was done so far in this turn.

## Context for Suffix
What is needed to understand the messages that follow."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Prompts:
    system: str = SYSTEM_PROMPT
    initial: str = INITIAL_PROMPT
    update: str = UPDATE_PROMPT
    turn_prefix: str = TURN_PREFIX_PROMPT
    layer: str = LAYER_PROMPT


def serialize(messages: Sequence[Message], max_chars: int = 0) -> str:
    """Labelled lines for the summarizer: [User]:, [Assistant]:, tool calls and results.

    Tool results keep their first 2000 characters; with ``max_chars`` any other text longer
    than that is cut too (so that one huge message cannot overflow the summarizer)."""
    lines: list[str] = []
    for m in messages:
        text = "\n".join(iter_text(m))
        r = role(m)
        if r in ("tool", "function"):
            lines.append(f"[{r.capitalize()} result]: {_cut(text)}")
        elif r == "assistant":
            if text:
                lines.append(f"[Assistant]: {_cut(text, max_chars)}")
            for fn in called_functions(m):
                lines.append(f"[Assistant tool calls]: {fn.get('name', '')}({_args(fn)})")
        elif text:
            lines.append(f"[{r.capitalize() or 'Message'}]: {_cut(text, max_chars)}")
    return fence("\n\n".join(lines))


def fence(text: str) -> str:
    """``text`` with the prompt's own tags defused (``<`` becomes ``&lt;``), so a message that
    contains ``</conversation>`` cannot step outside the quoted conversation."""
    return _TAGS.sub(r"&lt;\1", text)


def _cut(text: str, limit: int = TOOL_RESULT_CHARS) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    more = len(text) - limit
    return f"{text[:limit]}\n\n[... {more} more characters truncated]"


def _args(fn: dict[str, object]) -> str:
    raw = fn.get("arguments", "")
    try:
        parsed = orjson.loads(raw) if isinstance(raw, str) and raw else {}
    except orjson.JSONDecodeError:
        return _cut(str(raw))
    if isinstance(parsed, dict):
        return _cut(", ".join(f"{k}={v!r}" for k, v in parsed.items()))
    return _cut(str(raw))


def summary_request(
    messages: Sequence[Message],
    previous: str | None,
    prompts: Prompts = Prompts(),
    max_chars: int = 0,
    layer: bool = False,
) -> list[Message]:
    """The chat messages asking an LLM for a summary (or an update of ``previous``; with
    ``layer``, a summary of the new messages alone that follows ``previous``)."""
    body = f"<conversation>\n{serialize(messages, max_chars)}\n</conversation>\n\n"
    if previous:
        quoted = fence(previous)
        ask = prompts.layer if layer else prompts.update
        body += f"<previous-summary>\n{quoted}\n</previous-summary>\n\n{ask}"
    else:
        body += prompts.initial
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": body}]


def turn_prefix_request(
    messages: Sequence[Message], prompts: Prompts = Prompts(), max_chars: int = 0
) -> list[Message]:
    text = serialize(messages, max_chars)
    if max_chars and len(text) > max_chars:
        text = text[-max_chars:]  # the end of the turn's beginning leads into what is kept
    body = f"<conversation>\n{text}\n</conversation>\n\n{prompts.turn_prefix}"
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": body}]


def merge_split(history_summary: str | None, turn_prefix: str) -> str:
    return (history_summary or NO_HISTORY) + SPLIT_SEPARATOR + turn_prefix
