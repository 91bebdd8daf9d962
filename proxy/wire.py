"""The request type every layer passes: one request as the planner sees it, and the caller's
own credential it may carry (made at the edge by proxy/edge/intake.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.formats.base import CompactionAsk, View, WireFormat
from proxy.formats.chat import CHAT
from proxy.windows.models import ModelSpec, ResolvedPolicy
from strategies.tokens import Counter


@dataclass(frozen=True, slots=True)
class Credential:
    """A caller's own upstream credential and the header it came in: ``authorization`` (a
    bearer token: OpenAI's SDKs), ``x-api-key`` (Anthropic's, Claude Code) or ``api-key``
    (Azure's). It goes only where the caller sent it, the way it was sent."""

    value: str = field(repr=False)  # never in a log line or a traceback
    header: str


UNSET = View(messages=[])


@dataclass(kw_only=True, slots=True)
class WireRequest:
    """One request as the planner sees it: validated, controls taken out, model resolved, and
    its conversation as the engine's view."""

    body: bytes
    payload: dict[str, Any]
    spec: ModelSpec
    window: int | None
    policy: ResolvedPolicy
    fmt: WireFormat = CHAT
    view: View = field(default_factory=lambda: UNSET)  # made from the payload when left unset
    team: str = "default"
    scope: str = ""  # whose checkpoints (see Principal.scope); empty: the team's
    # Passthrough: the caller's own credential, which goes only to ``addressed``, the upstream
    # of the model the caller asked for (a fallback or a summarizer elsewhere spends its own).
    credential: Credential | None = None
    addressed: str = ""
    learns_as: str = ""  # whose learned windows and calibration (Principal.learns_as)
    alone: str = ""  # a caller without a credential: this request's own name (Principal.alone)
    session_memory: str | None = None
    reserve_default: int | None = None  # the team's reply reserve, else trimming's
    cap: int | None = None  # the team's max_context_tokens: no prompt goes over it
    trim: bool = True
    pinned: frozenset[int] = frozenset()  # ids of view messages the request pins
    # Its conversation's key (proxy/request/conversations.py key_of), set by build_request.
    conversation: str = ""
    # The upstream's tokens per proxy token (the calibration the window was converted by): a
    # count in the proxy's units times this is one in the upstream's, as a reply limit is.
    units: float = 1.0
    # What a token the view hides (thinking, signatures, ids) weighs in shown ones, as the
    # calibration found the upstream counts it (proxy/windows/calibration.py).
    hidden_weight: float = 1.0
    message_weight: float = 0.0  # and a message's own cost, in shown tokens
    calibrated: bool = False  # the upstream's answers have calibrated the count already
    # Counted even when a byte bound shows it fits: the calibration wants it as a sample.
    sampled: bool = False
    # Bytes of the body that are items its conversation's last request sent as they are
    # (proxy/formats/reused_items.py): their counts are known; the rest is what may need tokenizing.
    reused: int = 0
    # A Messages body's context_management, taken out for its upstream
    # (proxy/formats/anthropic_edits.py): what its edits did, when served (reported in the
    # answer); None when the body had none, or it was forwarded or stripped.
    context_edits: list[dict[str, Any]] | None = None
    # A compaction the client asked for and the proxy serves (Responses context_management,
    # Anthropic's compact_20260112 edit or compaction parameter)
    compaction: CompactionAsk | None = None
    # The client's own compaction request (its compaction prompt is the newest user message):
    # fitted by cutting, never summarized (a summary of what it is summarizing)
    client_compaction: bool = False
    # A request the proxy made itself to answer the model's recall calls (the client's own
    # request continued: proxy/request/recall.py), and whether it may offer the tool again.
    continuation: bool = False
    # Planned in shadow mode (proxy/edge/shadow.py): after it went upstream as sent, a plan
    # that makes no summary beyond the team's shadow allowance and keeps no recall originals.
    shadow: bool = False
    offer_recall: bool = True
    # The recall tool's name, reserved for the client's request (proxy/formats/recall.py):
    # its continuations offer the tool under the same name; None: reserved when first offered.
    recall_name: str | None = None

    @property
    def owner(self) -> str:
        """Whose share of the store the objects it makes take (proxy/stores/quota.py): its
        team's, in passthrough its caller's (as ``learns_as``)."""
        return self.learns_as or self.team

    @property
    def fresh(self) -> int:
        """Bytes of the body not reused from the conversation's last request."""
        return max(0, len(self.body) - self.reused)

    def __post_init__(self) -> None:
        if self.view is UNSET:
            self.view = self.fmt.view(self.payload)

    def credential_for(self, upstream: str, sends_as: str) -> str | None:
        """The caller's credential for a call to ``upstream`` that sends its key in the header
        ``sends_as``: only to the upstream the caller addressed; as a bearer token only when it
        came as one (an Anthropic ``x-api-key`` is never re-sent as a bearer token, which an
        OpenAI-style endpoint of the same host, or the gateway behind it, would take)."""
        found = self.credential
        if found is None or upstream != self.addressed:
            return None
        if sends_as == "authorization" and found.header != "authorization":
            return None
        return found.value

    def counter(self) -> Counter:
        """The model's counter over this request's view, weighted as calibrated."""
        return self.view.counter(self.spec.pricing.counter, self.hidden_weight, self.message_weight)
