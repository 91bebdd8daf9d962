"""Cutting inside the newest step: the last resort before a refusal.

    cut_output(text, cap, counter, how_back) -> str | None
    cut_step(messages, indices, need, counter, handles) -> StepCut | None

The newest step (the last assistant message's calls and their outputs) is what the model acts
on next, so every plan keeps it whole. When it cannot fit beside the instructions and the task
(one ``cat`` of a large file, one failing test run printing thousands of lines, at an 8-16k
window), refusing the request ends the agent's session. Instead its outputs are cut, the
largest first, down to a common cap (water-filling: every output over the cap is cut to it,
the smaller ones are left whole), until the step fits:

- an output keeps its head and its tail (a file's opening, a test run's summary) and, between
  them, every line that reads as an error (``strategies/error_output.py``), in order;
- its first line says it was cut, how much, and how to get the rest: ``recall: <handle>`` when
  the policy offers recall (the proxy keeps the original, ``proxy/request/recall.py``), else a
  narrower call to run again;
- calls, call ids and the assistant message are never touched; an output with no text (a
  screenshot, shell output objects) is never cut; images in an output that is cut are dropped.

Pure: the caller gives a counter; the result is new message dicts, the others unchanged.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from strategies.error_output import is_error_line
from strategies.messages import ANSWERING, Message
from strategies.outputs import named, output_text, with_text
from strategies.tokens import Counter, MemoCounter

STEP_CUT = "step-outputs-cut"  # the action, followed by how many outputs were cut
MIN_KEEP = 100  # tokens an output is never cut below: its markers and a few lines of it
RERUN = "for the rest, run the tool again narrower (a line range, a filter)"
ESCAPED_LINES = 16  # an output with fewer real lines and at least this many escaped ones
ROUNDS = 6  # tries to bring a cut under its cap (a recount after each: merges at the cut)


@dataclass(frozen=True, slots=True)
class StepCut:
    messages: list[Message]
    saved: int  # tokens, by the counter's message prices
    cut: int  # outputs cut


def cut_step(
    messages: Sequence[Message],
    indices: Sequence[int],
    need: int,
    counter: Counter,
    handles: bool = False,
    others: Sequence[int] = (),
) -> StepCut | None:
    """``messages`` with the outputs among ``indices`` cut, the largest first, to save at least
    ``need`` tokens; None when no output can be cut. The result may save less than ``need``
    when the outputs cannot go lower (each keeps at least ``MIN_KEEP``); the caller checks.
    ``others``: the sizes of messages the caller cuts next (a running task's statement), which
    share the cut: no output is cut below the level they are cut to."""
    sizes: dict[int, int] = {}
    least: dict[int, int] = {}  # each output's own floor: its frame and MIN_KEEP of text
    for i in indices:
        m = messages[i]
        if m.get("role") not in ANSWERING or _text_of(m) is None:
            continue
        size, floor = counter.message(m), counter.message(with_text(m, "")) + MIN_KEEP
        if size > floor:
            sizes[i], least[i] = size, floor
    if not sizes or need <= 0:
        return None
    cap = water_level([*sizes.values(), *others], need)
    if all(size <= max(cap, least[i]) for i, size in sizes.items()):
        return None
    best: StepCut | None = None
    for _ in range(ROUNDS):
        out, saved, cut = list(messages), 0, 0
        for i, size in sizes.items():
            if size <= max(cap, least[i]):
                continue
            shorter = _cut_message(messages[i], max(cap, least[i]), counter, handles)
            if shorter is None:
                continue
            out[i] = shorter
            saved += size - counter.message(shorter)
            cut += 1
        if cut and (best is None or saved > best.saved):
            best = StepCut(out, saved, cut)
        # what the others give at this level (the caller cuts them to it next)
        shared = sum(max(0, size - cap) for size in others)
        if saved + shared >= need or all(cap <= floor for floor in least.values()):
            break
        over = max(1, cut or len(sizes))
        cap = max(0, cap - -(-(need - saved) // over))
    return best


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


def _cut_message(message: Message, cap: int, counter: Counter, handles: bool) -> Message | None:
    """``message`` with its text cut so that the message costs at most ``cap`` tokens."""
    text = _text_of(message)
    if text is None:
        return None
    frame = counter.message(with_text(message, ""))
    content = message.get("content")
    images = (
        sum(1 for p in content if isinstance(p, dict) and p.get("type") not in ("text", None))
        if isinstance(content, list)
        else 0
    )
    how_back = "recall: HANDLE" if handles else RERUN
    cut = cut_output(text, cap - frame, counter, how_back, images)
    if cut is None:
        return None
    if handles:
        cut = named(cut.replace("; recall: HANDLE", "", 1), message, True)
    shorter = with_text(message, cut)
    if counter.message(shorter) > cap:  # the handle's few characters
        return None
    return shorter


def text_cost(counter: Counter) -> Callable[[str], int]:
    """What a text costs by ``counter`` (which prices messages): a tool output holding it,
    less an empty one."""
    if isinstance(counter, MemoCounter):
        counter = counter.inner
    empty = counter.message({"role": "tool", "content": ""})

    def price(text: str) -> int:
        return counter.message({"role": "tool", "content": text}) - empty

    return price


def cut_output(
    text: str, cap: int, counter: Counter, how_back: str = RERUN, images: int = 0
) -> str | None:
    """``text`` in at most ``cap`` tokens: its head and tail, the error lines between them and
    a first line saying what was cut; None when even that does not fit (or nothing needs
    cutting)."""
    price = text_cost(counter)
    total = price(text)
    if total <= cap and not images:
        return None
    sep = _separator(text)
    lines = text.split(sep)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + len(sep))
    errors = [k for k, line in enumerate(lines) if line and is_error_line(line)]
    room = cap
    for _ in range(ROUNDS):
        result = _assemble(text, total, room, price, how_back, images, lines, starts, errors, sep)
        if result is None:
            return None
        size = price(result)
        if size <= cap:
            return result
        room -= size - cap + max(1, (size - cap) // 4)
    return None


def _assemble(
    text: str,
    total: int,
    room: int,
    price: Callable[[str], int],
    how_back: str,
    images: int,
    lines: list[str],
    starts: list[int],
    errors: list[int],
    sep: str,
) -> str | None:
    """One try at a cut of ``text`` in ``room`` tokens (the caller recounts it)."""
    widest = _header(total, total, how_back, images, len(errors), len(errors))
    marker = f"[... lines {len(lines):,}-{len(lines):,} cut ({len(lines):,} lines) ...]"
    body = room - price(widest) - price(marker) - 3
    if body <= 0:
        return None
    # The error lines first (the head and tail give way to them); past half the room, as
    # many as it holds from both ends (the first failure and the runner's summary).
    chosen = errors
    cost = sum(price(lines[k]) + 1 for k in chosen)
    if cost > body // 2:
        chosen = _spread(errors, lines, body // 2, price)
        cost = sum(price(lines[k]) + 1 for k in chosen)
    left = body - cost
    head_end = _prefix_within(text, left // 2, price, sep)
    tail_start = _suffix_within(text, left - price(text[:head_end]), price, head_end, sep)
    if tail_start <= head_end:
        return text
    first = bisect_right(starts, head_end) - 1  # the line the cut starts in
    if first + 1 < len(lines) and head_end == starts[first] + len(lines[first]):
        first += 1  # the head ends at that line's end: the cut starts at the next
    last = bisect_right(starts, tail_start - 1) - 1  # the line it ends in
    # the error lines the cut touches: not wholly in the head, nor wholly in the tail
    inside = [k for k in errors if starts[k] + len(lines[k]) > head_end and starts[k] < tail_start]
    picked = set(chosen)
    shown = [k for k in inside if k in picked]
    kept = price(text[:head_end]) + price(text[tail_start:])
    kept += sum(price(lines[k]) + 1 for k in shown)
    header = _header(total - kept, total, how_back, images, len(shown), len(inside))
    if first == last:
        said = f"{tail_start - head_end:,} characters of line {first + 1:,} cut"
    else:
        said = f"lines {first + 1:,}-{last + 1:,} cut ({last - first + 1:,} lines)"
    if shown:
        among = "the error lines" if len(shown) == len(inside) else f"{len(shown):,} of the "
        among += "" if len(shown) == len(inside) else f"{len(inside):,} error lines"
        gap = f"[... {said}; {among} among them follow ...]"
        parts = [header, text[:head_end], gap, *(lines[k] for k in shown), "[...]"]
    else:
        parts = [header, text[:head_end], f"[... {said} ...]"]
    return "\n".join([*(p for p in parts if p), text[tail_start:]])


def _separator(text: str) -> str:
    """What separates the output's lines: a newline, or, for an output that is one JSON
    document holding a command's output in a string (Codex's exec results), its escaped
    newlines."""
    if text.count("\n") < ESCAPED_LINES and text.count("\\n") >= ESCAPED_LINES:
        return "\\n"
    return "\n"


def _header(cut: int, total: int, how_back: str, images: int, shown: int, errors: int) -> str:
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
