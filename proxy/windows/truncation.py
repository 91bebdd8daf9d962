"""Silent truncation, told from usage: an upstream that reads less of a prompt than it was sent,
without a word (Ollama cuts a chat prompt from its start until it fits ``num_ctx``, keeping its
system messages and its last message, and its usage counts what it kept).

Its count of the prompt says so when it falls short of what the text sent could count under any
tokenizer the calibration allows, or, in a conversation that grew, when it grew by less than
any such tokenizer would count of what was added since the conversation's last answer. What was
read then bounds the window from below, what was sent from above (proxy/windows/bounds.py).
"""

from __future__ import annotations

from collections import OrderedDict

from proxy.windows.calibration import Sample

GREW = 0.05  # a prompt this much larger than the conversation's last one grew
SLACK = 64  # tokens: a short prompt's framing
MAX_CONVERSATIONS = 8192


def read_short(sample: Sample, floor: float, before: Sample | None) -> bool:
    """Whether the upstream read less of a prompt than it was sent: its count (``theirs``) is
    under what any tokenizer the calibration allows (``floor`` of the proxy's count: even an
    exact tokenizer's count of a Responses body runs well above the upstream's, which frames
    items and tools its own way) would make of the text the view shows (hidden tokens,
    signatures and encrypted reasoning, may cost it nothing); or, when the prompt grew from the
    conversation's last answered one (``before``), its count grew by less than that floor of
    what the text grew by."""
    if sample.theirs < floor * sample.shown - SLACK:
        return True
    if before is None or sample.messages <= before.messages:
        return False
    grew = sample.shown - before.shown
    if grew < GREW * before.shown:
        return False
    return sample.theirs < before.theirs + floor * grew - SLACK


class RecentUsage:
    """The last whole read of each recent conversation (its upstream count beside the proxy's):
    what the next answer's growth is judged against. A bounded cache, per process."""

    def __init__(self, size: int = MAX_CONVERSATIONS) -> None:
        self._last: OrderedDict[str, Sample] = OrderedDict()
        self._size = size

    def swap(self, conversation: str, sample: Sample | None) -> Sample | None:
        """Keep ``sample`` as the conversation's last; the one it replaces."""
        before = self._last.pop(conversation, None)
        if sample is not None:
            self._last[conversation] = sample
            if len(self._last) > self._size:
                self._last.popitem(last=False)
        return before
