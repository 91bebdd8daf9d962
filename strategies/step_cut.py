"""Cutting inside the newest step: the last resort before a refusal.

    cut_output(text, cap, counter, marker) -> str | None
    cut_step(messages, indices, Aim(need, handles, others), counter) -> StepCut | None
    cut_part(original, shown) -> str | None   what a cut left out: what its recall gives back

The newest step (the last assistant message's calls and their outputs) is what the model acts
on next, so every plan keeps it whole. When it cannot fit beside the instructions and the task
(one ``cat`` of a large file, one failing test run printing thousands of lines, at an 8-16k
window), refusing the request ends the agent's session. Instead its outputs are cut, the
largest first, down to a common cap (water-filling: every output over the cap is cut to it,
the smaller ones are left whole), until the step fits:

- an output keeps its head and its tail (a file's opening, a test run's summary) and, between
  them, every line that reads as an error (``strategies/error_output.py``), in order (a line
  over ``ERROR_LINE_CHARS`` is no log line: a one-line JSON dump is cut by its characters);
- its first line says it was cut, how much, and how to get the rest: ``recall: <handle>`` when
  the policy offers recall, else a narrower call to run again. The handle is the cut's own
  (``cut_handle``): the proxy keeps under it the part the cut left out (``cut_part``), so a
  recall gives the model what it did not see, not the head and tail again
  (``proxy/request/recall.py``). The marker is priced as sent, handle and all;
- the error lines come before the head and the tail: when the room is too small for those, an
  output is its marker and its error lines alone, and when it is too small for every error
  line, it keeps as many as fit, taken alternately from the first and the last (the first
  failure, and the runner's summary at the end), its marker saying how many. Every output
  keeps at least its marker (``least``): a step is never refused while its markers fit;
- calls, call ids and the assistant message are never touched; an output with no text (a
  screenshot, shell output objects) is never cut; images in an output that is cut are dropped.

Pure: the caller gives a counter; the result is new message dicts, the others unchanged.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from strategies.error_output import is_error_line
from strategies.messages import ANSWERING, Message
from strategies.outputs import handle_for, handle_text, output_text, with_text
from strategies.tokens import Counter, MemoCounter

STEP_CUT = "step-outputs-cut"  # the action, followed by how many outputs were cut
# The engine's step (not applied) that says how many tokens the cut's error lines missed by.
ERRORS_SHORT = "step-error-lines-short"
MIN_KEEP = 100  # tokens an output's least cut (its frame and marker, ``least``) stays under
RERUN = "for the rest, run the tool again narrower (a line range, a filter)"
OPENING = "[Output cut to fit the context window: "  # a cut output's first line starts so
PLACEHOLDER = "recall: r" + "0" * 12  # a handle's place while the cut is made (as long as one)
HEAD_AND_TAIL = 16  # tokens, at the least, worth a head and a tail beside the error lines
# The line between the head and the tail, saying what it stands for.
GAP = re.compile(
    r"\[\.\.\. (?:lines ([\d,]+)-([\d,]+) cut \([\d,]+ lines\)"
    r"|([\d,]+) characters of line ([\d,]+) cut)(?:; [^\]]*)? \.\.\.\]"
)
ESCAPED_LINES = 16  # an output with fewer real lines and at least this many escaped ones
ROUNDS = 6  # tries to bring a cut under its cap (a recount after each: merges at the cut)
# A line longer than this is no log line (minified JSON, a one-line dump): one that holds an
# error word is cut by its characters like any other, not kept whole or dropped whole.
ERROR_LINE_CHARS = 2_000


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCut:
    messages: list[Message]
    saved: int  # tokens, by the counter's message prices
    cut: int  # outputs cut
    # Tokens more than ``need`` that every error line would have taken: 0 when the cut keeps
    # them all (or the outputs have none), else what a caller may find elsewhere (a reply
    # reserve nobody asked for) before it settles for a cut without them.
    short: int = 0


@dataclass(frozen=True, slots=True)
class Aim:
    """What a cut of the newest step is to do: save ``need`` tokens, its markers naming
    recall handles (``handles``: the policy offers recall) or a narrower call, and share the
    cut with ``others``, the sizes of messages the caller cuts next (a running task's
    statement)."""

    need: int
    handles: bool = False
    others: Sequence[int] = ()


def cut_step(
    messages: Sequence[Message], indices: Sequence[int], aim: Aim, counter: Counter
) -> StepCut | None:
    """``messages`` with the outputs among ``indices`` cut, the largest first, to save at least
    ``aim.need`` tokens; None when no output can be cut. Each output keeps at least its marker
    and every error line, or, when that cannot save the need, at least its marker
    (``least``); the result may save less than the need even so: the caller checks. When the
    error lines were given up, ``short`` says how many tokens more would have kept them all.
    ``aim.others``: the sizes of messages the caller cuts next (a running task's statement),
    which share the cut: no output is cut below the level they are cut to."""
    need, handles = aim.need, aim.handles
    if need <= 0:
        return None
    best: StepCut | None = None
    with_errors = 0  # what the cut that keeps every error line saves
    for errors in (True, False):
        sizes: dict[int, int] = {}
        floors: dict[int, int] = {}  # each output's own floor (``least``)
        for i in indices:
            m = messages[i]
            if m.get("role") not in ANSWERING or _text_of(m) is None:
                continue
            size, floor = counter.message(m), least(m, counter, handles, errors)
            if size > floor:
                sizes[i], floors[i] = size, floor
        cut, enough = _cut_to(messages, sizes, floors, aim, counter)
        if errors:
            with_errors = cut.saved if cut is not None else 0
        if cut is not None and (best is None or cut.saved > best.saved):
            best = cut
        if (
            not errors
            and best is not None
            and any(least(messages[i], counter, handles, True) > f for i, f in floors.items())
        ):  # error lines were given up: by how much they missed
            best = replace(best, short=max(1, need - with_errors))
        if enough:
            break
    return best


def _cut_to(
    messages: Sequence[Message],
    sizes: dict[int, int],
    floors: dict[int, int],
    aim: Aim,
    counter: Counter,
) -> tuple[StepCut | None, bool]:
    """The outputs of ``sizes`` cut to a common level, none below its floor, to save
    ``aim.need``; and whether the best cut, with what the others give at its level, saves
    it."""
    need, handles, others = aim.need, aim.handles, aim.others
    if not sizes:
        return None, False
    cap = water_level([*sizes.values(), *others], need)
    if all(size <= max(cap, floors[i]) for i, size in sizes.items()):
        return None, False
    best: StepCut | None = None
    enough = False
    for _ in range(ROUNDS):
        out, saved, cut = list(messages), 0, 0
        for i, size in sizes.items():
            if size <= max(cap, floors[i]):
                continue
            shorter = _cut_message(messages[i], max(cap, floors[i]), counter, handles)
            if shorter is None:
                continue
            out[i] = shorter
            saved += size - counter.message(shorter)
            cut += 1
        # what the others give at this level (the caller cuts them to it next)
        shared = sum(max(0, size - cap) for size in others)
        if cut and (best is None or saved > best.saved):
            best = StepCut(messages=out, saved=saved, cut=cut)
            enough = saved + shared >= need
        if saved + shared >= need or all(cap <= floor for floor in floors.values()):
            break
        over = max(1, cut or len(sizes))
        cap = max(0, cap - -(-(need - saved) // over))
    return best, enough


def water_level(sizes: Sequence[int], need: int) -> int:
    """The largest cap that, with every size over it cut down to it, saves at least ``need``
    (0 when even cutting everything to nothing does not)."""
    ordered = sorted(sizes, reverse=True)
    above = 0  # the sum of the sizes above the level being tried
    for k, size in enumerate(ordered, start=1):
        above += size
        nxt = ordered[k] if k < len(ordered) else 0
        # with the k largest cut to a level L in [nxt, size]: saved = above - k * L
        if above - k * nxt >= need:
            return max(nxt, (above - need) // k)
    return 0


def _text_of(message: Message) -> str | None:
    """The output's text, or None when it has none to cut (content objects, an empty one)."""
    content = message.get("content")
    if isinstance(content, str):
        return content or None
    if isinstance(content, list):
        text = output_text(message)
        return text or None
    return None


def _images(message: Message) -> int:
    """The output's parts that are not text (images): a cut drops them."""
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for p in content if isinstance(p, dict) and p.get("type") not in ("text", None))


@dataclass(frozen=True, slots=True)
class Marker:
    """How a cut marks itself: what its first line says to get the rest (``how_back``), how
    many images it removed, and what names its handle in the finished cut (``finish``; None:
    nothing to name)."""

    how_back: str = RERUN
    images: int = 0
    finish: Callable[[str], str] | None = None

    def done(self, cut: str) -> str:
        """The cut as sent: its handle named."""
        return cut if self.finish is None else self.finish(cut)


RERUN_MARKER = Marker()


def _marker(message: Message, handles: bool) -> Marker:
    """How a cut of ``message`` marks itself: to get the rest, a narrower call, or a recall of
    its handle, whose place is held by ``PLACEHOLDER`` while the cut is made (every size is
    measured with the handle in it)."""
    images = _images(message)
    if not handles or handle_for(message) is None:
        return Marker(RERUN, images)

    def finish(cut: str) -> str:
        return cut.replace(PLACEHOLDER, f"recall: {cut_handle(message, cut)}", 1)

    return Marker(PLACEHOLDER, images, finish)


def cut_handle(original: Message, cut: str) -> str:
    """The handle a cut names: of the call, its original and the cut made of it (another cut
    leaves out another part, kept under another handle)."""
    h = hashlib.blake2b(digest_size=6, person=b"step-cut")
    for piece in (str(original.get("tool_call_id", "")), output_text(original), cut):
        h.update(piece.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return handle_text(h)


def least(message: Message, counter: Counter, handles: bool = False, errors: bool = False) -> int:
    """What ``message`` costs cut as far as a cut goes: its frame and its marker alone (with
    ``errors``: and every error line)."""
    text = _text_of(message) or ""
    price = text_cost(counter)
    marker = _marker(message, handles)
    sep = _separator(text)
    found = [line for line in text.split(sep) if _kept_whole(line)]
    shown = found if errors else []
    total = price(text)
    bare = marker.done("\n".join([_header(total, total, marker, len(shown), len(found)), *shown]))
    return counter.message(with_text(message, bare))


def _cut_message(message: Message, cap: int, counter: Counter, handles: bool) -> Message | None:
    """``message`` with its text cut so that the message costs at most ``cap`` tokens."""
    text = _text_of(message)
    if text is None:
        return None
    frame = counter.message(with_text(message, ""))
    marker = _marker(message, handles)
    cut = cut_output(text, cap - frame, counter, marker)
    if cut is None:
        return None
    shorter = with_text(message, cut)
    # the text's price is the message's less its frame, give or take a merge at the seam
    for _ in range(ROUNDS):
        over = counter.message(shorter) - cap
        if over <= 0:
            return shorter
        cut = cut_output(text, cap - frame - over, counter, marker)
        if cut is None:
            return None
        shorter = with_text(message, cut)
    return None


def text_cost(counter: Counter) -> Callable[[str], int]:
    """What a text costs by ``counter`` (which prices messages): a tool output holding it,
    less an empty one."""
    if isinstance(counter, MemoCounter):
        counter = counter.inner
    empty = counter.message({"role": "tool", "content": ""})

    def price(text: str) -> int:
        return counter.message({"role": "tool", "content": text}) - empty

    return price


@dataclass(frozen=True, slots=True, kw_only=True)
class _Text:
    """An output's text as a cut reads it: its lines, where each starts, its error lines."""

    text: str
    total: int  # its price
    sep: str
    lines: list[str]
    starts: list[int]
    errors: list[int]  # the indices of its error lines


def _read(text: str, price: Callable[[str], int]) -> _Text:
    sep = _separator(text)
    lines = text.split(sep)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + len(sep))
    errors = [k for k, line in enumerate(lines) if _kept_whole(line)]
    return _Text(text=text, total=price(text), sep=sep, lines=lines, starts=starts, errors=errors)


def cut_output(text: str, cap: int, counter: Counter, marker: Marker = RERUN_MARKER) -> str | None:
    """``text`` in at most ``cap`` tokens: its head and tail, the error lines between them and
    a first line saying what was cut; when the room holds no head and tail beside the error
    lines, the first line and the error lines alone (as many as fit). None when even the first
    line does not fit (or nothing needs cutting). ``marker``: what its first line says, and
    what the cut becomes as sent (its handle named), measured as such."""
    price = text_cost(counter)
    t = _read(text, price)
    if t.total <= cap and not marker.images:
        return None
    room = cap
    for _ in range(ROUNDS):
        result = _assemble(t, room, price, marker)
        if result is None:
            break
        result = marker.done(result)
        size = price(result)
        if size <= cap:
            return result
        room -= size - cap + max(1, (size - cap) // 4)
    return _bare(t, cap, price, marker)


def _bare(t: _Text, cap: int, price: Callable[[str], int], marker: Marker) -> str | None:
    """The first line and as many error lines as ``cap`` holds (every one, else as many as
    fit taken alternately from the first and the last); None when the first line alone does
    not fit."""
    every = len(t.errors)
    widest = price(marker.done(_header(t.total, t.total, marker, every, every)))
    room = cap - widest - 1
    chosen = t.errors  # every one first, priced as sent
    for _ in range(ROUNDS + 2):
        kept = sum(price(t.lines[k]) + 1 for k in chosen)
        header = _header(t.total - kept, t.total, marker, len(chosen), every)
        result = marker.done("\n".join([header, *(t.lines[k] for k in chosen)]))
        size = price(result)
        if size <= cap:
            return result
        if not chosen:
            return None
        if len(chosen) < every:
            room -= size - cap + max(1, (size - cap) // 4)
        chosen = _spread(t.errors, t.lines, room, price) if room > 0 else []
    return None


def _assemble(t: _Text, room: int, price: Callable[[str], int], marker: Marker) -> str | None:
    """One try at a cut of ``t`` in ``room`` tokens with a head and a tail (the caller
    recounts it); None when the room holds no head and tail beside every error line."""
    text, lines, starts, errors, sep = t.text, t.lines, t.starts, t.errors, t.sep
    widest = _header(t.total, t.total, marker, len(errors), len(errors))
    gap_line = f"[... lines {len(lines):,}-{len(lines):,} cut ({len(lines):,} lines) ...]"
    body = room - price(widest) - price(gap_line) - 3
    # The error lines first: the head and the tail have what they leave, if it is worth it.
    left = body - sum(price(lines[k]) + 2 for k in errors) - (2 if errors else 0)
    if left < HEAD_AND_TAIL:
        return None
    head_end = _prefix_within(text, left // 2, price, sep)
    tail_start = _suffix_within(text, left - price(text[:head_end]), price, head_end, sep)
    # An error line is shown whole or not at all: a head that would end inside one ends
    # before it, a tail that would start inside one starts after it (the line follows the gap).
    at = bisect_right(starts, head_end) - 1
    if at in errors and starts[at] < head_end < starts[at] + len(lines[at]):
        head_end = starts[at]
    at = bisect_right(starts, tail_start) - 1
    if at in errors and starts[at] < tail_start < starts[at] + len(lines[at]):
        tail_start = starts[at] + len(lines[at])
    if tail_start <= head_end:
        return text
    first = bisect_right(starts, head_end) - 1  # the line the cut starts in
    if first + 1 < len(lines) and head_end == starts[first] + len(lines[first]):
        first += 1  # the head ends at that line's end: the cut starts at the next
    last = bisect_right(starts, tail_start - 1) - 1  # the line it ends in
    # the error lines the cut touches: not wholly in the head, nor wholly in the tail
    inside = [k for k in errors if starts[k] + len(lines[k]) > head_end and starts[k] < tail_start]
    kept = price(text[:head_end]) + price(text[tail_start:])
    kept += sum(price(lines[k]) + 1 for k in inside)
    header = _header(t.total - kept, t.total, marker, len(inside), len(inside))
    if first == last:
        said = f"{tail_start - head_end:,} characters of line {first + 1:,} cut"
    else:
        said = f"lines {first + 1:,}-{last + 1:,} cut ({last - first + 1:,} lines)"
    if inside:
        gap = f"[... {said}; the error lines among them follow ...]"
        parts = [header, text[:head_end], gap, *(lines[k] for k in inside), "[...]"]
    else:
        parts = [header, text[:head_end], f"[... {said} ...]"]
    return "\n".join([*(p for p in parts if p), text[tail_start:]])


def cut_part(original: str, shown: str) -> str | None:
    """The part of ``original`` that ``shown``, a cut of it, left out (what a recall of the
    cut's handle gives back): the lines its gap line names, or the characters of the one
    line; the whole of it for a cut to its marker and error lines alone; None when ``shown``
    is not a cut of ``original``."""
    header, newline, rest = shown.partition("\n")
    if not header.startswith(OPENING):
        return None
    if not newline:
        return original
    pos = 0
    while pos <= len(rest):
        end = rest.find("\n", pos)
        end = len(rest) if end == -1 else end
        found = GAP.fullmatch(rest, pos, end)
        head = rest[: max(0, pos - 1)]
        if found is not None and original.startswith(head):
            return _named_part(original, found, len(head))
        pos = end + 1
    return original  # no head and no tail: everything but the error lines was cut


def _named_part(original: str, gap: re.Match[str], head: int) -> str:
    first, last, chars, _ = gap.groups()
    if chars is not None:
        return original[head : head + int(chars.replace(",", ""))]
    sep = _separator(original)
    lines = original.split(sep)
    return sep.join(lines[int(first.replace(",", "")) - 1 : int(last.replace(",", ""))])


def _kept_whole(line: str) -> bool:
    """Whether a cut keeps ``line`` whole, as an error line."""
    return 0 < len(line) <= ERROR_LINE_CHARS and is_error_line(line)


def _separator(text: str) -> str:
    """What separates the output's lines: a newline, or, for an output that is one JSON
    document holding a command's output in a string (Codex's exec results), its escaped
    newlines."""
    if text.count("\n") < ESCAPED_LINES and text.count("\\n") >= ESCAPED_LINES:
        return "\\n"
    return "\n"


def _header(cut: int, total: int, marker: Marker, shown: int, errors: int) -> str:
    how_back, images = marker.how_back, marker.images
    if not errors:
        kept = "head and tail kept"
    elif shown == errors:
        kept = "every error line kept"
    else:
        kept = f"{shown:,} of its {errors:,} error lines kept"
    dropped = f", {images:,} image(s) removed" if images else ""
    return (
        f"[Output cut to fit the context window: {max(cut, 0):,} of {total:,} tokens cut from "
        f"the middle, {kept}{dropped}; {how_back}]"
    )


def _prefix_within(text: str, tokens: int, price: Callable[[str], int], sep: str = "\n") -> int:
    """The end of the longest prefix of ``text``, ending at a line's end where one is near,
    that costs at most ``tokens``."""
    if tokens <= 0:
        return 0
    end = _longest(len(text), tokens, lambda n: price(text[:n]))
    newline = text.rfind(sep, 0, end)
    return newline if newline > end // 2 else end


def _suffix_within(
    text: str, tokens: int, price: Callable[[str], int], floor: int, sep: str = "\n"
) -> int:
    """The start of the longest suffix of ``text`` after ``floor``, starting at a line's
    start where one is near, that costs at most ``tokens``."""
    if tokens <= 0:
        return len(text)
    size = _longest(len(text) - floor, tokens, lambda n: price(text[len(text) - n :]))
    start = len(text) - size
    newline = text.find(sep, start, len(text) - size // 2)
    return newline + len(sep) if newline != -1 else start


def _longest(limit: int, tokens: int, measure: Callable[[int], int]) -> int:
    """The largest n <= limit with measure(n) <= tokens (cost grows with n): a guess from the
    text's own ratio, then a binary search between what fits and what does not."""
    if limit <= 0:
        return 0
    if measure(limit) <= tokens:
        return limit
    lo, hi = 0, limit  # measure(lo) <= tokens < measure(hi)
    guess = min(limit - 1, max(1, tokens * 3))
    while hi - lo > 1:
        mid = guess if lo < guess < hi else (lo + hi) // 2
        guess = -1
        if measure(mid) <= tokens:
            lo = mid
        else:
            hi = mid
    return lo


def _spread(
    errors: list[int], lines: list[str], tokens: int, price: Callable[[str], int]
) -> list[int]:
    """As many of the error lines as ``tokens`` hold, taken from both ends, in order."""
    front: list[int] = []
    back: list[int] = []
    used = 0
    i, j = 0, len(errors) - 1
    take_front = True
    while i <= j:
        k = errors[i] if take_front else errors[j]
        cost = price(lines[k]) + 1
        if used + cost > tokens:
            break
        used += cost
        if take_front:
            front.append(k)
            i += 1
        else:
            back.append(k)
            j -= 1
        take_front = not take_front
    return [*front, *reversed(back)]
