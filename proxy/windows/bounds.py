"""A window learned without figures: an upstream whose overflow error states no limit still says
the window is below what was sent, and every answer it gives says the window holds what was sent.
Both are kept per team and model, in the upstream's units, as the *need* of a request: its prompt
and the reply limit it sent (proxy/request/lessons.py).

    refused    the smallest need refused: the window is below it
    accepted   the largest need accepted below that: the window holds it

The window in force narrows between the two like a bisection: each request that reaches it is a
probe at the middle of the gap. A probe the upstream accepts raises ``accepted``; one it refuses
lowers ``refused``, and its retry goes at ``accepted``, which the upstream already took. The gap
halves with every probe, so it closes within a few requests; probing stops when it is within
``CLOSE`` of the window, or once ``MAX_REFUSALS`` refusals were learned (each one cost a round
trip): from then on the window is ``accepted``. A refusal at or below ``accepted`` says the window
shrank (a server restarted with less): what was accepted is forgotten, and learning starts again.
An answer at or above ``refused`` is not believed over the refusal: the smaller window stands.

    largest    the largest prompt the upstream took, whatever was refused since

The window never goes below ``largest``: a refusal of a need at or below it is not believed
(the proxy's count of that request was wrong, say: content it cannot count, which one caller
could send to shrink the window of its whole team), unless the upstream's own figures say so
(``sure``: Ollama's usage after a silent truncation). A lesson is tried again after a while
(``heal``: proxy/windows/learned.py): a request past ``refused`` that the upstream takes shows
the refusal wrong, or the window grown, and the bounds start again from what it took.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_REFUSALS = 3
CLOSE = 0.02  # the gap, as a share of the refused need, under which probing stops
MIN_GAP = 64  # and, in tokens, whatever the share


@dataclass(slots=True, kw_only=True)
class Bounds:
    """What a team's requests taught about one model's window, without figures."""

    refused: int | None = None
    accepted: int | None = None
    refusals: int = 0
    largest: int | None = None  # the largest prompt taken

    def refuse(self, need: int, sure: bool = False) -> bool:
        """A request of ``need`` was refused; whether the bounds moved. ``sure``: the
        upstream's own figures say so, even below a prompt it took before."""
        if need <= 0 or (self.refused is not None and need >= self.refused):
            return False
        if self.largest is not None and need <= self.largest:
            if not sure:
                return False  # it took a larger prompt: the count was wrong, not the window
            self.largest = None  # the window shrank under what it took before
        self.refused = need
        self.refusals += 1
        if self.accepted is not None and self.accepted >= need:
            self.accepted = None  # the window shrank under what it took before
        return True

    def accept(self, need: int, prompt: int | None = None) -> bool:
        """A request of ``need`` (``prompt`` and its reply limit) was answered whole; whether
        the bounds, or the window they set, moved."""
        before = self.window()
        if prompt is not None and prompt > 0 and prompt > (self.largest or 0):
            self.largest = prompt
        if need <= 0 or (self.accepted is not None and need <= self.accepted):
            return self.window() != before
        if self.refused is not None and need >= self.refused:
            # Taken at or above what was refused: the counts' noise (a usage beside the
            # proxy's own count), or a window that grew; the smaller window stands (an
            # operator's reset, the server's own figure, or a retry after a while says it
            # grew).
            return self.window() != before
        self.accepted = need
        return True

    def heal(self, need: int, prompt: int | None) -> bool:
        """A request past what was refused (a retry after a while) was answered whole: the
        refusal no longer holds; the bounds start again from what it took. Whether they
        moved."""
        if self.refused is None or need < self.refused:
            return False
        self.refused, self.accepted, self.refusals = None, need, 0
        if prompt is not None and prompt > (self.largest or 0):
            self.largest = prompt
        return True

    @property
    def settled(self) -> bool:
        """Whether probing has stopped: the gap is closed, or enough refusals were paid."""
        if self.refused is None or self.accepted is None:
            return False
        gap = self.refused - self.accepted
        return gap <= max(MIN_GAP, CLOSE * self.refused) or self.refusals >= MAX_REFUSALS

    def window(self) -> int | None:
        """The window the next requests are fitted to: the middle of the gap while probing,
        ``accepted`` once settled, half of what was refused while nothing was taken below it;
        None while nothing was refused (nothing bounds it); never below ``largest``."""
        if self.refused is None:
            return None
        if self.accepted is None:
            window = self.refused // 2  # nothing taken yet: anywhere below, as a retry guesses
        elif self.settled:
            window = self.accepted
        else:
            window = (self.accepted + self.refused) // 2
        return max(window, self.largest or 0)

    def safe(self) -> int | None:
        """The window a refused request is retried at: the largest need the upstream took."""
        return self.accepted if self.refused is not None else None

    def describe(self) -> str:
        took = f"took {self.accepted}" if self.accepted is not None else "took nothing yet"
        state = "settled" if self.settled else "narrowing"
        largest = f", at least the largest prompt taken, {self.largest}" if self.largest else ""
        return (
            f"learned without figures: refused {self.refused}, {took} "
            f"(prompt and reply limit, {self.refusals} refusal(s), {state}){largest}"
        )
