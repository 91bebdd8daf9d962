"""``content_compact``: older tool outputs compacted by what they hold (opt-in per policy: add it
to a policy's ``pipeline`` after ``lossless``).

- a JSON document: each large array as its first and last items, a count and the schema of
  the rest (strategies/json_digest.py);
- a file read (a read tool's output, or a shell ``cat`` of one file): its path and outline,
  the definitions with their line numbers;
- a log (any other output of many lines): its error and warning lines with two lines of
  context each, its first and last lines, and how many lines each gap left out.

Each result opens with a line that says what it is and what it left out (and, under a policy
with ``recall``, the handle that brings the original back: strategies/outputs.py). An output
is rewritten only when that saves at least a third of it. The newest ``keep_recent`` outputs,
the newest step's, and error outputs are left as they came; the result depends only on the
call and the output, so it has the same bytes in every later request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from strategies.checkpoints.cut import FileTools
from strategies.json_digest import digest
from strategies.messages import Message
from strategies.microcompact import CLEARED
from strategies.outputs import named, output_text, rewritable, with_text
from strategies.shell_files import shell_files
from strategies.tokens import Counter

CONTEXT = 2  # lines kept around an error or warning line
EDGE = 3  # first and last lines of a log kept
MIN_LOG_LINES = 40
WARNING = re.compile(r"\b(warn(?:ing)?|deprecat\w*)\b", re.IGNORECASE)
ERROR = re.compile(
    r"\b(error|errors|fail(?:ed|ure)?|fatal|panic|exception|traceback)\b", re.IGNORECASE
)
DEFINITION = re.compile(
    r"^\s*(?:(?:pub(?:\([a-z]+\))?|export|async|static|public|private|protected|abstract)\s+)*"
    r"(?:def|class|func|fn|function|interface|struct|enum|trait|impl|type|module|"
    r"const\s+[A-Z_][A-Z0-9_]*\s*=|[A-Z_][A-Z0-9_]+\s*(?::[^=]*)?=)\b"
    r"|^#{1,6} \S"
)
LINE_NUMBER = re.compile(r"^\s*(\d+)(?:→|\t|:\s|\|)")
PATH_KEYS = ("path", "file_path", "filePath", "file", "filename")
# How the outputs this pass and microcompact make begin.
MADE = ("[JSON compacted:", "[log compacted:", "[file read compacted:", CLEARED)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentCompact:
    keep_recent: int = 3
    min_chars: int = 2000
    handles: bool = False  # set by a policy with ``recall``: each result names its handle
    read_tools: tuple[str, ...] = FileTools().read
    shell_tools: tuple[str, ...] = FileTools().shell

    name = "content_compact"

    def __post_init__(self) -> None:
        if self.keep_recent < 0 or self.min_chars < 0:
            raise ValueError("keep_recent and min_chars must be >= 0")

    def apply(self, messages: Sequence[Message], counter: Counter) -> list[Message]:
        out = list(messages)
        candidates = list(rewritable(messages))
        old = candidates[: max(0, len(candidates) - self.keep_recent)]
        calls = _calls(messages)
        for i in old:
            text = output_text(messages[i])
            if len(text) < self.min_chars or text.startswith(MADE):
                continue  # small, or made by a pass already
            call = calls.get(str(messages[i].get("tool_call_id")), ("", ""))
            short = self.compact(text, call)
            if short is not None and len(short) * 3 <= len(text) * 2:
                out[i] = with_text(messages[i], named(short, messages[i], self.handles))
        return out

    def compact(self, text: str, call: tuple[str, str]) -> str | None:
        """``text`` compacted by its kind, or None when it is none of them."""
        value = _json(text)
        if value is not None:
            short, omitted = digest(value)
            if not omitted:
                return None
            return f"[JSON compacted: left out {omitted.describe()}]\n{short}"
        path = self._file_read(call)
        if path is not None:
            return outline(text, path)
        return compact_log(text)

    def _file_read(self, call: tuple[str, str]) -> str | None:
        """The one file a call reads whole, when it is a read tool's or a shell ``cat``."""
        name, arguments = call
        try:
            args = json.loads(arguments) if arguments else {}
        except ValueError:
            return None
        if not isinstance(args, dict):
            return None
        if name in self.read_tools:
            path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), None)
            return path
        if name in self.shell_tools or "command" in args or "cmd" in args:
            command = args.get("command", args.get("cmd"))
            if isinstance(command, str | list):
                read, modified = shell_files(command)
                words = command if isinstance(command, list) else command.split()
                if len(read) == 1 and not modified and "cat" in " ".join(words):
                    return next(iter(read))
        return None


def outline(text: str, path: str) -> str | None:
    """A file read as its path and the definitions in it with their line numbers."""
    lines = text.split("\n")
    found = []
    for k, line in enumerate(lines, 1):
        numbered = LINE_NUMBER.match(line)
        number, body = (int(numbered.group(1)), line[numbered.end() :]) if numbered else (k, line)
        if DEFINITION.match(body):
            found.append(f"{number}: {body.strip()[:120]}")
    head = (
        f"[file read compacted: {path}, {len(lines)} lines; its outline (definitions with "
        f"line numbers) is below, the rest left out]"
    )
    return "\n".join([head, *found])


def compact_log(text: str) -> str | None:
    """A long log as its error and warning lines with context, its first and last lines,
    and the count of each gap's lines; None for a short one."""
    lines = text.split("\n")
    if len(lines) < MIN_LOG_LINES:
        return None
    marked = [k for k, line in enumerate(lines) if ERROR.search(line) or WARNING.search(line)]
    keep = set(range(EDGE)) | set(range(len(lines) - EDGE, len(lines)))
    for k in marked:
        keep.update(range(max(0, k - CONTEXT), min(len(lines), k + CONTEXT + 1)))
    errors = sum(1 for k in marked if ERROR.search(lines[k]))
    out: list[str] = []
    gap = 0
    for k, line in enumerate(lines):
        if k in keep:
            if gap:
                out.append(f"[… {gap} lines left out]")
                gap = 0
            out.append(line)
        else:
            gap += 1
    head = (
        f"[log compacted: kept {len(keep)} of {len(lines)} lines: the first and last, and "
        f"{errors} error and {len(marked) - errors} warning lines with context]"
    )
    return "\n".join([head, *out])


def _json(text: str) -> object | None:
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return None
    try:
        value: object = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value


def _calls(messages: Sequence[Message]) -> dict[str, tuple[str, str]]:
    """tool_call_id -> (tool name, raw arguments)."""
    out: dict[str, tuple[str, str]] = {}
    for m in messages:
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                out[str(call.get("id"))] = (str(fn.get("name", "")), str(fn.get("arguments", "")))
    return out
