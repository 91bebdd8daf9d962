"""Calibration: how the proxy's count of a prompt runs against the upstream's own count, per
team and model, so that a window stated in the upstream's units can be used in the proxy's.

For a model the proxy only estimates (``tokenizer: estimate``, e.g. current Claude models: a
cl100k count times ``estimate_ratio``), every answer carries the upstream's exact count of the
prompt (``usage``; see proxy/request/usage.py), and every overflow error that states its
figures does too. Each is a :class:`Sample`: the upstream's count beside the proxy's, split into
what the view shows and what it only carries (thinking and its signatures, ids, opaque items; see
strategies/tokens.py ``HiddenCounter``).

One ratio cannot describe both a plain request and a thinking-heavy one: an upstream does not
count a signature the way the proxy's tokenizer does, and a request's fixed cost (a tool-use
system prompt, say) weighs on a small prompt far more than on a large one. So the samples are
fitted, by least squares, to

    theirs = per_token * shown + hidden * hidden_tokens + fixed + per_message * messages

each sample's error taken relative to its count, so a small prompt weighs as much as a large
one. Among the fits the samples can tell apart (a hidden weight needs samples whose hidden share
differs; a fixed cost needs prompts of different sizes, or, beside a client's frame of tool
definitions that is the same on every request, messages of different sizes, and then two
prompts tell it; a per-message cost, prompts of different message sizes; each, a sample more
than its unknowns), the one
taken spreads the samples' ratios to it least, with the fewest unknowns on a near tie. It is
made conservative: scaled by the largest factor by which any sample ran over it, plus
``SLACK``, so the room it wastes on any sample is its spread. With no sample that can tell,
what hidden tokens cost stays what it was last found (at first, the same as shown ones: the
proxy's own count).

Samples come from prompts of any size, once ``MIN_SEEN`` have been made; the last ``KEEP`` are
kept. A fit is persisted with the learned windows (in the store's integer settings) and
restored as the fit in force until fresh samples replace it.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from dataclasses import dataclass, field, replace

KEEP = 32
MIN_SEEN = 3
SLACK = 1.02
LOW, HIGH = 0.5, 2.0  # the per-token ratio is clamped: a wild answer cannot unbound the budget
WILD = 4.0  # a usage this far past the bounds counted something else: it is no sample
MAX_HIDDEN = 2.0  # what a hidden token may cost, at most, in the upstream's tokens
MAX_PER_MESSAGE = 64.0  # and a message of its own
SIZE_SPREAD = 0.2  # prompts must differ in size by this share for a fixed cost to be fitted
SHARE_SPREAD = 0.05  # and in hidden share by this much for the hidden weight to be
TIE = 1.005  # a fit with more unknowns is taken only when it spreads the samples less than this


@dataclass(kw_only=True, frozen=True, slots=True)
class Sample:
    """One exact count: the upstream's tokens for a prompt the proxy counted at ``ours``
    (tool definitions included, unweighted), ``hidden`` of them in what the view does not
    show."""

    theirs: int
    ours: int
    hidden: int = 0
    messages: int = 0  # the messages it held (a per-message cost of the upstream's own)
    tools: int = 0  # of ``ours``, the tool definitions (a client's frame, the same each request)

    @property
    def shown(self) -> int:
        return self.ours - self.hidden


@dataclass(kw_only=True, frozen=True, slots=True)
class Fit:
    """The upstream's tokens for a prompt, from the proxy's count of it: ``per_token`` for each
    shown token, ``hidden`` for each hidden one, and ``fixed`` for the request itself.

    A fit is trusted over the sizes its samples spanned (``span``, in weighted proxy tokens:
    shown plus weighted hidden). Past it, each token costs ``edge``, the largest sample's own
    ratio when that is more: a fixed cost told from small prompts alone is never extrapolated
    to a large one on trust; the first large prompt answered extends the span."""

    per_token: float
    hidden: float
    fixed: float = 0.0
    span: float = math.inf
    edge: float = 0.0
    per_message: float = 0.0

    @property
    def hidden_weight(self) -> float:
        """A hidden token as a number of shown ones (how the view's counter weighs it)."""
        return self.hidden / self.per_token

    @property
    def message_weight(self) -> float:
        """A message's own cost as a number of shown tokens (the view's counter adds it)."""
        return self.per_message / self.per_token

    def weighted(self, sample: Sample) -> float:
        """A sample's size as the view's counter weighs it under this fit."""
        return self._size(sample.ours, sample.hidden, sample.messages)

    def _size(self, ours: int, hidden: int, messages: int) -> float:
        per_token = max(1e-9, self.per_token)
        return (
            (ours - hidden)
            + self.hidden / per_token * hidden
            + self.per_message / per_token * messages
        )

    def predict(self, ours: int, hidden: int = 0, messages: int = 0) -> float:
        weighted = self._size(ours, hidden, messages)
        inside = min(weighted, self.span)
        beyond = weighted - inside
        return self.per_token * inside + self.fixed + max(self.edge, self.per_token) * beyond

    def window(self, window: int) -> int:
        """``window`` (the upstream's units) in the proxy's weighted tokens."""
        room = window - self.fixed
        if room <= self.per_token * self.span:
            return max(0, math.floor(room / self.per_token))
        beyond = (room - self.per_token * self.span) / max(self.edge, self.per_token)
        return math.floor(self.span + beyond)

    def scaled(self, factor: float) -> Fit:
        return replace(
            self,
            per_token=self.per_token * factor,
            hidden=self.hidden * factor,
            fixed=self.fixed * factor,
            edge=self.edge * factor,
            per_message=self.per_message * factor,
        )

    def spanning(self, samples: list[Sample]) -> Fit:
        """This fit, trusted over the sizes of ``samples``."""
        largest = max(samples, key=self.weighted)
        span = self.weighted(largest)
        return replace(self, span=span, edge=largest.theirs / max(1e-9, span))


IDENTITY = Fit(per_token=1.0, hidden=1.0)


@dataclass(kw_only=True, slots=True)
class _State:
    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=KEEP))
    weight: float = 1.0  # a hidden token in shown ones, as last found (1: not yet)
    restored: Fit | None = None
    fit: Fit | None = None


class Calibration:
    """The fits in force, per team and model."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], _State] = {}

    def observe(self, team: str, model: str, sample: Sample) -> Fit | None:
        """Record one exact count; the fit now in force (None: not yet)."""
        if sample.ours <= 0 or sample.theirs <= 0:
            return self.fit(team, model)
        # Hidden content (earlier turns' thinking) may cost the upstream next to nothing: only
        # what the view shows bounds a sample from below.
        if not LOW / WILD * max(sample.shown, 0) <= sample.theirs <= HIGH * WILD * sample.ours:
            return self.fit(team, model)  # not a count of this prompt (a truncation, a stub)
        state = self._states.setdefault((team, model), _State())
        state.samples.append(sample)
        if len(state.samples) >= MIN_SEEN:
            state.fit = fitted(list(state.samples), state.weight)
            state.weight = state.fit.hidden_weight
        return self.fit(team, model)

    def fit(self, team: str, model: str) -> Fit | None:
        state = self._states.get((team, model))
        if state is None:
            return None
        return state.fit or state.restored

    def ratio(self, team: str, model: str) -> float | None:
        """Upstream tokens per shown proxy token, when calibrated."""
        fit = self.fit(team, model)
        return None if fit is None else fit.per_token

    def hidden_weight(self, team: str, model: str) -> float:
        fit = self.fit(team, model)
        return 1.0 if fit is None else fit.hidden_weight

    def message_weight(self, team: str, model: str) -> float:
        fit = self.fit(team, model)
        return 0.0 if fit is None else fit.message_weight

    def window(self, team: str, model: str, window: int) -> int:
        """``window`` in the proxy's own tokens for this team and model."""
        fit = self.fit(team, model)
        return window if fit is None else fit.window(window)

    def predict(self, team: str, model: str, sample: Sample) -> int:
        """The upstream's count of a prompt the proxy counted as ``sample`` (its ``theirs`` is
        not read): the fit's prediction, else the proxy's own count."""
        fit = self.fit(team, model)
        if fit is None:
            return sample.ours
        return math.ceil(fit.predict(sample.ours, sample.hidden, sample.messages))

    def wants(self, team: str, model: str) -> bool:
        """Whether more samples are wanted (fewer than ``KEEP`` kept): a request the proxy
        would not otherwise count is then counted, to be a sample."""
        state = self._states.get((team, model))
        return state is None or len(state.samples) < KEEP

    def forget(self, team: str, model: str) -> bool:
        return self._states.pop((team, model), None) is not None

    def restore(self, team: str, model: str, fit: Fit) -> None:
        """A persisted fit: in force until ``MIN_SEEN`` fresh samples replace it."""
        state = self._states.setdefault((team, model), _State())
        state.restored = _clamped(fit)
        state.weight = state.restored.hidden_weight

    def items(self) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (team, model), state in self._states.items():
            fit = state.fit or state.restored
            if fit is not None:
                out.setdefault(team, {})[model] = {
                    "per_token": round(fit.per_token, 4),
                    "hidden": round(fit.hidden, 4),
                    "fixed": round(fit.fixed, 1),
                    "per_message": round(fit.per_message, 2),
                    "samples": len(state.samples),
                }
        return out


def fitted(samples: list[Sample], weight: float = 1.0) -> Fit:
    """The conservative fit of ``samples`` (see the module's text); ``weight``: what a hidden
    token costs in shown ones when no sample can tell."""
    made = []
    for f, k in _candidates(samples, weight):
        ratios = _ratios(f, samples)  # the same under the fit spanning them: all are inside
        spread = max(ratios) / max(1e-9, min(ratios))
        made.append((f.spanning(samples).scaled(max(ratios) * SLACK), spread, k))
    valid = [(fit, spread, k) for fit, spread, k in made if _valid(fit, samples)]
    if not valid:  # the plain ratio, clamped (always solvable from positive counts)
        plain = (_solve(samples, weight, "tied") or IDENTITY).spanning(samples)
        return _clamped(_conservative(plain, samples))
    least = min(spread for _, spread, _ in valid)
    # The fewest unknowns that come within a hair of the best (more must earn their place),
    # the first listed among those.
    near = [(k, i, fit) for i, (fit, spread, k) in enumerate(valid) if spread <= least * TIE]
    return min(near, key=lambda c: (c[0], c[1]))[2]


def _conservative(fit: Fit, samples: list[Sample]) -> Fit:
    """``fit`` scaled so that no sample runs over it, and by ``SLACK`` more."""
    return fit.scaled(max(_ratios(fit, samples)) * SLACK)


def _ratios(fit: Fit, samples: list[Sample]) -> list[float]:
    return [s.theirs / max(1e-9, fit.predict(s.ours, s.hidden, s.messages)) for s in samples]


def _candidates(samples: list[Sample], weight: float) -> list[tuple[Fit, int]]:
    """Each fit the samples can tell, with its number of unknowns (a sample more than its
    unknowns, so that one checks the others), in order of preference on a tie: the hidden
    weight already found before a new one."""
    sizes = [s.ours for s in samples]
    shares = [s.hidden / s.ours for s in samples]
    density = [s.messages / s.ours for s in samples]
    sized = _spread(sizes)
    # A client's frame of tool definitions, the same on every request (Claude Code's 16k), is
    # a fixed cost of its own that the upstream may count at another rate than the messages:
    # the messages' sizes, differing, tell it apart, however large the frame is beside them.
    # Two prompts tell it, without a third to check them: the fit is then exact on both, and
    # the frame it stands for is the same on every request it is used for.
    tools = {s.tools for s in samples}
    framed = not sized and len(tools) == 1 and min(tools) > 0
    framed = framed and _spread([s.ours - s.tools for s in samples])
    sized = sized or framed
    # Hidden tokens: weighed as before, or not at all (when weighing them as before would take
    # a ratio out of bounds); freely, when shares differ.
    modes = ["tied", "zero"] if max(shares) > 0 else ["tied"]
    if max(shares) - min(shares) >= SHARE_SPREAD:
        modes.insert(1, "free")
    dense = max(density) > 0 and max(density) - min(density) >= SIZE_SPREAD * max(density)
    points = len({(s.ours, s.hidden, s.messages) for s in samples})  # a repeat tells nothing
    out = []
    for per_message in (False, True) if dense else (False,):
        for fixed in (False, True) if sized else (False,):
            for mode in modes:
                unknowns = 1 + (mode == "free") + fixed + per_message
                fit = _solve(samples, weight, mode, fixed, per_message)
                told = points > unknowns or (framed and fixed and points == unknowns == 2)
                if fit is not None and told:
                    out.append((fit, unknowns))
    return out


def _spread(sizes: list[int]) -> bool:
    """Whether ``sizes`` differ by ``SIZE_SPREAD`` of the largest: a fixed cost can be told."""
    return max(sizes) > 0 and max(sizes) - min(sizes) >= SIZE_SPREAD * max(sizes)


def _solve(
    samples: list[Sample], weight: float, mode: str, fixed: bool = False, per_message: bool = False
) -> Fit | None:
    """theirs = a * shown + b * hidden [+ c] [+ m * messages], with b = a * weight ("tied"),
    free, or 0."""
    rows = []
    for s in samples:
        row = [s.shown + (weight * s.hidden if mode == "tied" else 0.0)]
        row += [float(s.hidden)] if mode == "free" else []
        row += [1.0] if fixed else []
        row += [float(s.messages)] if per_message else []
        rows.append((row, s))
    x = _least_squares(rows)
    if x is None:
        return None
    a, rest = x[0], x[1:]
    b = a * weight if mode == "tied" else (rest.pop(0) if mode == "free" else 0.0)
    c = rest.pop(0) if fixed else 0.0
    m = rest.pop(0) if per_message else 0.0
    return Fit(per_token=a, hidden=b, fixed=c, per_message=m)


def _least_squares(samples: list[tuple[list[float], Sample]]) -> list[float] | None:
    """Least squares of the samples' relative errors (each row over its count, so a small
    prompt weighs as much as a large one): the normal equations over columns scaled to unit
    length, solved by Gaussian elimination with partial pivoting; None when the samples cannot
    tell the unknowns apart."""
    k = len(samples[0][0])
    if len(samples) < k:
        return None
    # By columns (the target is 1 in every row), each product summed in C.
    columns = [[r[i] / s.theirs for r, s in samples] for i in range(k)]
    norms = [math.sqrt(sum(map(operator.mul, c, c))) or 1.0 for c in columns]
    columns = [[v / n for v in c] for c, n in zip(columns, norms, strict=True)]
    a = [[sum(map(operator.mul, ci, cj)) for cj in columns] for ci in columns]
    b = [sum(c) for c in columns]
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) <= 1e-9:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        b[col], b[pivot] = b[pivot], b[col]
        for r in range(col + 1, k):
            f = a[r][col] / a[col][col]
            for c in range(col, k):
                a[r][c] -= f * a[col][c]
            b[r] -= f * b[col]
    x = [0.0] * k
    for i in reversed(range(k)):
        x[i] = (b[i] - sum(a[i][j] * x[j] for j in range(i + 1, k))) / a[i][i]
    return [v / n for v, n in zip(x, norms, strict=True)]


def _valid(fit: Fit, samples: list[Sample]) -> bool:
    return (
        LOW <= fit.per_token <= HIGH
        and 0.0 <= fit.hidden <= MAX_HIDDEN
        and 0.0 <= fit.fixed <= min(s.theirs for s in samples)
        and 0.0 <= fit.per_message <= MAX_PER_MESSAGE
    )


def _clamped(fit: Fit) -> Fit:
    per_token = min(HIGH, max(LOW, fit.per_token))
    return replace(
        fit,
        per_token=per_token,
        hidden=min(MAX_HIDDEN, max(0.0, fit.hidden)),
        fixed=max(0.0, fit.fixed),
        edge=min(HIGH, max(0.0, fit.edge)),
        per_message=min(MAX_PER_MESSAGE, max(0.0, fit.per_message)),
    )


# How a fit is kept in the store's integer settings, one key each, under ``prefix + scope``.
PER_TOKEN_KEY = "calibration\t"
HIDDEN_KEY = "calibration-hidden\t"
FIXED_KEY = "calibration-fixed\t"
SPAN_KEY = "calibration-span\t"
EDGE_KEY = "calibration-edge\t"
MESSAGE_KEY = "calibration-message\t"
SETTING_KEYS = (PER_TOKEN_KEY, HIDDEN_KEY, FIXED_KEY, SPAN_KEY, EDGE_KEY, MESSAGE_KEY)


def to_settings(fit: Fit) -> dict[str, int]:
    """A fit as integer settings: its ratios in thousandths, its fixed cost and span in tokens
    (a span of 0: unbounded)."""
    return {
        PER_TOKEN_KEY: round(fit.per_token * 1000),
        HIDDEN_KEY: round(fit.hidden_weight * 1000),
        FIXED_KEY: round(fit.fixed),
        SPAN_KEY: 0 if math.isinf(fit.span) else round(fit.span),
        EDGE_KEY: round(fit.edge * 1000),
        MESSAGE_KEY: round(fit.message_weight * 1000),
    }


def from_settings(values: dict[str, int]) -> Fit | None:
    """The fit persisted as ``values`` (by prefix); None without its per-token ratio. A store
    written before hidden tokens were weighed holds the ratio alone: weight 1, no fixed cost."""
    per_token = values.get(PER_TOKEN_KEY)
    if not per_token or per_token <= 0:
        return None
    ratio = per_token / 1000
    weight = values.get(HIDDEN_KEY, 1000) / 1000
    span = values.get(SPAN_KEY, 0) or math.inf
    edge = values.get(EDGE_KEY, 0) / 1000
    per_message = ratio * values.get(MESSAGE_KEY, 0) / 1000
    return Fit(
        per_token=ratio,
        hidden=ratio * weight,
        fixed=float(values.get(FIXED_KEY, 0)),
        span=span,
        edge=edge,
        per_message=per_message,
    )


def moved(before: Fit | None, after: Fit | None) -> bool:
    """Whether ``after`` differs from ``before`` enough to be persisted again (a percent of a
    ratio, or a percent of the fixed cost and at least a few tokens)."""
    if after is None:
        return False
    if before is None:
        return True
    return (
        abs(after.per_token - before.per_token) >= 0.01 * before.per_token
        or abs(after.hidden_weight - before.hidden_weight) >= 0.01 * max(0.01, before.hidden_weight)
        or abs(after.fixed - before.fixed) >= max(4.0, 0.01 * before.fixed)
        or after.span > before.span * 1.01
        or abs(after.message_weight - before.message_weight) >= 0.05
    )
