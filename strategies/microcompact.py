"""``tool_result_microcompact``: clear old tool results (agentcore's ToolResultMicrocompact).

Candidates are ``tool`` messages answering an earlier assistant call, optionally only for some
tool names and above a size. Walking newest first, the results of the ``keep_recent`` most recent
distinct calls (same name and arguments) are kept; every other candidate, older duplicates of a
kept call included, has its content replaced by a placeholder that says what was there: the
tool, its arguments (the file or command, shortened) and the result's size. The placeholder
depends only on the call and the result, so a cleared result has the same bytes in every later
request (the prompt's cached prefix survives). Clearing is idempotent. An error output is never
cleared, as in the reference: one flagged (``is_error``: an Anthropic ``tool_result`` that says
so) or one that reads as an error log, flag or not (strategies/error_output.py: chat and
Responses results carry no flag). A failed build's or test's output is what the agent needs
most.

With ``handles`` (a policy with ``recall``), each placeholder also names the handle under which
the proxy keeps the original, for the model to recall it (strategies/outputs.py).

With ``batch`` above 1, results are cleared oldest first in whole batches: the set of cleared
results, and with it the prompt's prefix that providers cache, changes only once every
``batch`` results instead of on every request (each change re-bills the whole prompt after it
at the cache-write price).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strategies.error_output import is_error_result
from strategies.messages import ANSWERING, Message, function_call
from strategies.outputs import named
from strategies.tokens import Counter

CLEARED = "[Tool result cleared to save context"
PLACEHOLDER = CLEARED + ": {tool} {args}, {tokens} tokens.]"
MAX_ARGS_CHARS = 80


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMicrocompact:
    keep_recent: int = 5
    include_tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()
    min_result_tokens: int = 0
    placeholder: str = PLACEHOLDER
    batch: int = 1
    handles: bool = False  # set by a policy with ``recall``: each placeholder names its handle

    name = "tool_result_microcompact"

    def __post_init__(self) -> None:
        if self.keep_recent < 0 or self.min_result_tokens < 0:
            raise ValueError("keep_recent and min_result_tokens must be >= 0")
        if self.batch < 1:
            raise ValueError("batch must be >= 1")

    def apply(self, messages: Sequence[Message], counter: Counter) -> list[Message]:
        calls = _calls_by_id(messages)
        kept_keys: set[tuple[str, str]] = set()
        clear: dict[int, tuple[str, int, str]] = {}
        fixed = self.placeholder.split("{", 1)[0]  # how every cleared result starts
        filtered = bool(self.include_tools or self.exclude_tools or self.min_result_tokens)
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if m.get("role") not in ANSWERING:  # most messages answer no call
                continue
            call = _call_answered(messages, i, calls)
            if call is None or call[1] >= i:
                continue
            if filtered and not self._eligible(call[0], m, counter):
                continue
            if is_error_result(m):
                continue  # a failed build's or test's output is what the agent needs most
            key = (call[0], call[2])
            if key not in kept_keys and len(kept_keys) < self.keep_recent:
                kept_keys.add(key)
            elif not _starts(m, fixed):
                clear[i] = call
        if self.batch > 1:  # whole batches, oldest first
            oldest = sorted(clear)
            whole = set(oldest[: len(oldest) // self.batch * self.batch])
            clear = {i: call for i, call in clear.items() if i in whole}
        out = list(messages)
        for i, call in clear.items():
            out[i] = {**messages[i], "content": self._text(call, messages[i], counter)}
        return out

    def _text(self, call: tuple[str, int, str], message: Message, counter: Counter) -> str:
        """The placeholder for ``message``, the result of ``call``: its fields filled in."""
        if "{" not in self.placeholder:
            return named(self.placeholder, message, self.handles)
        args = " ".join(call[2].split())
        if len(args) > MAX_ARGS_CHARS:
            args = args[: MAX_ARGS_CHARS - 3] + "..."
        fields = {"{tool}": call[0], "{args}": args, "{tokens}": str(counter.message(message))}
        # Named before it is filled in: the call's arguments may hold a "]" of their own.
        text = named(self.placeholder, message, self.handles)
        for key, value in fields.items():
            text = text.replace(key, value)
        return text

    def _eligible(self, tool: str, message: Message, counter: Counter) -> bool:
        if self.include_tools and tool not in self.include_tools:
            return False
        if tool in self.exclude_tools:
            return False
        return not self.min_result_tokens or counter.message(message) >= self.min_result_tokens


def _starts(message: Message, fixed: str) -> bool:
    """Whether ``message`` is a result cleared already (its content starts as placeholders do)."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(fixed)


def _call_answered(
    messages: Sequence[Message], i: int, calls: dict[str, tuple[str, int, str]]
) -> tuple[str, int, str] | None:
    """(name, index of the call, arguments) that message ``i`` answers: a tool result by its
    id, a legacy function result by the ``function_call`` right before it."""
    m = messages[i]
    kind = m.get("role")
    if kind == "tool":
        answered = m.get("tool_call_id")
        return calls.get(answered if type(answered) is str else str(answered))
    if kind == "function" and i > 0:
        call = function_call(messages[i - 1])
        if call is not None:
            return (str(call.get("name", "")), i - 1, str(call.get("arguments", "")))
    return None


def _calls_by_id(messages: Sequence[Message]) -> dict[str, tuple[str, int, str]]:
    """tool_call_id -> (tool name, index of the calling message, raw arguments)."""
    out: dict[str, tuple[str, int, str]] = {}
    for i, m in enumerate(messages):
        if m.get("role") != "assistant" or type(m.get("tool_calls")) is not list:
            continue
        for call in m["tool_calls"]:
            if isinstance(call, dict):
                fn = call.get("function")
                fn = fn if isinstance(fn, dict) else {}
                out[str(call.get("id"))] = (
                    str(fn.get("name", "")),
                    i,
                    str(fn.get("arguments", "")),
                )
    return out
