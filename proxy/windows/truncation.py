"""Silent truncation, told from usage: an upstream that reads less of a prompt than it was sent,
without a word (Ollama cuts a chat prompt from its start until it fits ``num_ctx``, keeping its
system messages and its last message, and its usage counts what it kept).

Its count of the prompt says so when it falls short of what the text sent could count under any
tokenizer the calibration allows (``short_of_text``), or, in a conversation that grew, when it
grew by less than any such tokenizer would count of what was added since the conversation's last
answer (``short_of_growth``). What was read then bounds the window from below, what was sent
from above (proxy/windows/bounds.py).
"""

from __future__ import annotations

from collections import OrderedDict

from proxy.windows.calibration import Sample

GREW = 0.05  # a prompt this much larger than the conversation's last one grew
HIDDEN_SHARE = 0.05  # a prompt that hides more than this share is not judged by its growth
SLACK = 64  # tokens: a short prompt's framing
# Below this, a count is no truncated prompt (servers give a model 2,048 tokens at least:
# Ollama's floor) but a usage that does not count (a mock's 1, a gateway's 0).
MIN_READ = 512
MAX_CONVERSATIONS = 8192


def short_of_text(sample: Sample, floor: float) -> bool:
    """Whether the upstream's count of a prompt (``theirs``) is under what any tokenizer the
    calibration allows (``floor`` of the proxy's count: even an exact tokenizer's count of a
    Responses body runs well above the upstream's, which frames items and tools its own way)
    would make of the text the view shows (``shown``: hidden tokens, signatures and encrypted
    reasoning, may cost it nothing)."""
    return MIN_READ <= sample.theirs < floor * sample.shown - SLACK


def short_of_growth(sample: Sample, floor: float, before: Sample | None) -> bool:
    """Whether, the prompt having grown from the conversation's last answered one
    (``before``), the upstream's count grew by less than ``floor`` of what the text grew by."""
    if before is None or sample.messages <= before.messages or sample.theirs < MIN_READ:
        return False
    if _hides(sample) or _hides(before):
        # What a view hides the upstream counts its own way, and not every time (Anthropic
        # drops the thinking of earlier turns): growth says nothing of a cut then.
        return False
    grew = sample.shown - before.shown
    if grew < GREW * before.shown:
        return False
    return sample.theirs < before.theirs + floor * grew - SLACK


def _hides(sample: Sample) -> bool:
    return sample.hidden > HIDDEN_SHARE * sample.ours


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
