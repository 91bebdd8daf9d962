"""What a wire format gives the one engine, and takes back from it.

An adapter (a :class:`WireFormat`) does three things:

    parse   the body, validated in the format's own terms (BadRequest names what is wrong)
    view    the conversation as the engine's chat-shaped messages: the atomic units, roles and
            tiers (a call with its output; a turn's reasoning or thinking inside its assistant
            message), text for summaries and light trim, and token costs
    write   the kept messages back into the client's own format

Every trimming decision (policies, tiers, strategies, passes, checkpoints, cache-friendly cuts,
the overflow retry) is the engine's and the request path's, once, for every format.

A view message made from wire items carries them under ``SOURCE``. The engine never reads that
key: a message it keeps untouched is the same object, so its items go back as they came; one it
rewrote (a pass, a strategy) is a copy that still names its items, with the shown fields
changed; one with no source is new (a summary) and the adapter renders it. The view's counter
prices what the message shows plus, as text from the adapter's ``hidden``, everything it does
not (reasoning, signatures, ids): an upper bound on what the upstream counts.

Every format reads its body the same strict way (``parse_json``, ``reject_duplicate_keys``,
``check_request_basics``): only what the proxy relies on is checked; everything else is the
upstream's business and passes through untouched.
"""

from __future__ import annotations

import json
import re
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from proxy.errors import BadRequest
from proxy.formats.reused_items import Reuse
from strategies.messages import SOURCE, Message
from strategies.tokens import Counter, HiddenCounter

MAX_DEPTH = 254  # what orjson can write back
ROOT_WATCHED = (
    "model",
    "messages",
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "tools",
    "functions",
    "contextwarden",
)
MESSAGE_WATCHED = ("role", "content", "tool_calls", "tool_call_id", "function_call")


@dataclass(kw_only=True, slots=True)
class View:
    """A request's conversation as the engine sees it."""

    messages: list[Message]
    atomic_current: bool = False  # the running turn is kept whole and never rewritten
    items: int = 0  # wire items behind the messages (the byte bound's per-item overhead)
    hidden: Callable[[Message], str] | None = None  # the text of what a message's items hide
    # Ids of view messages the format keeps verbatim wherever they stand: the client's own
    # instructions inside the conversation (a Messages ``system`` message), never rewritten,
    # dropped or summarized.
    pinned: frozenset[int] = frozenset()
    # Ids of user view messages that continue the running task's tool loop rather than state
    # a task (text a Messages client put after its tool results, in the same message).
    continuing: frozenset[int] = frozenset()

    def counter(
        self, inner: Counter, hidden_weight: float = 1.0, message_weight: float = 0.0
    ) -> Counter:
        """The model's counter over this view: what a message shows plus what it hides, a hidden
        token weighing ``hidden_weight`` shown ones, and ``message_weight`` more a message (as
        the calibration found the upstream counts them: proxy/windows/calibration.py)."""
        if self.hidden is None and not message_weight:
            return inner
        return HiddenCounter(inner, self.hidden, hidden_weight, message_weight)

    def hidden_tokens(self, inner: Counter, messages: list[Message]) -> int:
        """What ``messages`` hide, in ``inner``'s tokens (unweighted)."""
        if self.hidden is None:
            return 0
        counter = HiddenCounter(inner, self.hidden)
        return sum(counter.hidden_of(m) for m in messages)


class WireFormat(Protocol):
    name: str  # "chat", "responses", "anthropic": the metrics label and the log's field
    api: str  # what an upstream declares it serves (``apis:``)
    path: str  # the upstream's path for it, under the base URL
    messages_param: str  # the body field an error about the conversation names

    def parse(self, body: bytes, reuse: Reuse | None = None) -> dict[str, Any]:
        """The payload, checked; with ``reuse``, the conversation's last request's items are
        matched first, and not checked again (proxy/formats/reused_items.py)."""
        ...

    def view(self, payload: dict[str, Any], reuse: Reuse | None = None) -> View:
        """The engine's view of the conversation; with ``reuse`` (the one parse matched), what
        the last request's view made of the same items is reused where it still holds."""
        ...

    def requested_output(self, payload: dict[str, Any]) -> int | None:
        """The request's own reply limit, the reply reserve when set."""
        ...

    def with_output(self, payload: dict[str, Any], limit: int) -> dict[str, Any]:
        """``payload`` with its reply limit lowered to ``limit`` (and whatever the format ties
        to it, such as a thinking budget that must stay below it)."""
        ...

    def stateful(self, payload: dict[str, Any]) -> bool:
        """Whether the server holds history the proxy cannot see."""
        ...

    def write(self, payload: dict[str, Any], view: View, kept: list[Message]) -> dict[str, Any]:
        """The payload to forward with ``kept`` (the engine's output) as its conversation."""
        ...

    def prompt_usage(self, usage: dict[str, Any]) -> int | None:
        """The prompt tokens the upstream says it counted, from an answer's ``usage``."""
        ...

    def stream_error(self, message: str) -> bytes:
        """The event that ends a stream the upstream broke off, in this format's shape, so the
        client's SDK raises."""
        ...


def text_parts(parts: Any) -> Iterator[dict[str, Any]]:
    """The text parts of a rewritten view message's content list, in order (none in a string:
    a format writes a string back whole, where it can)."""
    if not isinstance(parts, list):
        return iter(())
    return iter(p for p in parts if isinstance(p, dict) and p.get("type") == "text")


def with_texts(
    originals: list[Any],
    texts: Iterator[dict[str, Any]],
    key_of: Callable[[dict[str, Any]], str | None],
) -> list[Any]:
    """The one text write-back, for every format whose view shows a part of its wire items:
    ``originals`` (parts, blocks) with the texts of the view's text parts, in order. Each
    original the view showed as text (``key_of`` names its text field, mirroring the view's
    rule) takes the next text; one whose text did not change, and every other original, goes
    back as the same object. ``texts`` may be shared by several items (one assistant turn)."""
    out = []
    for old in originals:
        key = key_of(old) if isinstance(old, dict) else None
        if key is not None:
            new = next(texts, None)
            if new is not None and new.get("text") != old.get(key):
                old = {**old, key: new.get("text")}
        out.append(old)
    return out


def usage_int(usage: dict[str, Any], *keys: str) -> int | None:
    """The sum of ``keys`` in ``usage`` (absent ones count 0), None when the first is missing."""
    values = [usage.get(k) for k in keys]
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in values):
        return None
    first = values[0]
    if not isinstance(first, int):
        return None
    total = sum(v for v in values if isinstance(v, int))
    return total if total > 0 else None


def lowered(payload: dict[str, Any], keys: tuple[str, ...], limit: int) -> dict[str, Any]:
    """``payload`` with each of ``keys`` that holds an integer above ``limit`` set to it."""
    out = dict(payload)
    for key in keys:
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            out[key] = limit
    return out


def source(message: Message) -> Any:
    return message.get(SOURCE)


def parse_json(body: bytes) -> dict[str, Any]:
    """A JSON object the proxy can also write back: orjson reads 1024 levels of nesting but
    writes only 254, so a deeper body is refused here, before anything acts on it."""
    payload = load_json(body)
    check_writable(body, payload)
    return payload


def load_json(body: bytes) -> dict[str, Any]:
    """The body's JSON object, not yet checked for what orjson can write back (see
    ``check_writable``)."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadRequest("the request body must be a JSON object")
    return payload


def load_items(body: bytes, key: str, reuse: Reuse | None) -> tuple[dict[str, Any], int]:
    """The body's JSON object (not yet checked for write-back: see ``check_writable``), its
    leading ``key`` items, where its conversation's last request sent them as they are, that
    request's objects (proxy/formats/reused_items.py); how many were."""
    if reuse is None:
        return load_json(body), 0
    payload = reuse.load(body, key)
    if payload is None:
        payload = load_json(body)
        if isinstance(payload.get(key), list):
            reuse.match(body, payload, key)
    return payload, reuse.known


def check_writable(
    body: bytes, payload: dict[str, Any], reuse: Reuse | None = None
) -> bytes | None:
    """400 when ``payload`` is nested deeper than orjson writes (see ``parse_json``); the
    payload written out, when it was (``reject_duplicate_keys`` compares it with the body). A
    body the reuse found to be the payload written out (proxy/formats/reused_items.py) is not
    written again."""
    if (reuse is not None and reuse.written) or len(body) <= MAX_DEPTH:
        return None  # a body that short cannot be that deep; writing is cheaper than counting
    try:
        return orjson.dumps(payload)
    except orjson.JSONEncodeError:
        message = f"the request body is nested more than {MAX_DEPTH} levels deep"
        raise BadRequest(message) from None


def reject_duplicate_keys(
    body: bytes,
    payload: dict[str, Any],
    reuse: Reuse | None = None,
    written: bytes | None = None,
) -> None:
    """400 when a key the proxy acts on appears twice in one object: orjson keeps the last one
    while the upstream, given the original bytes, might take the first, so the proxy would check
    one ``model`` and forward another.

    Most clients send compact JSON (JSON.stringify, serde_json, httpx): a body that is exactly
    what orjson writes for the parsed payload holds no duplicate (it *is* the payload written
    out), and writing it is cheaper than scanning it; the reuse of a conversation's last items
    may have found that already (``reuse.written``), or ``check_writable`` written it
    (``written``). Otherwise the exact check re-parses with
    the stdlib's hook, so it runs only when a cheap count says a duplicate is possible: a key
    spelled with an escape, or a watched key in the raw bytes more often than the parsed
    objects hold it (inside strings quotes are escaped, so ``"model"`` only matches a key or a
    whole string value). One regex pass counts every watched key."""
    if reuse is not None and reuse.written:
        return
    if (written if written is not None else _written_back(payload)) == body:
        return
    if _escapes_ascii(body) or _more_in_raw(body, payload):
        try:
            json.loads(body, object_pairs_hook=_unique)
        except _Duplicate as exc:
            message = f"the key {exc.key!r} appears twice in one object"
            raise BadRequest(message, param=exc.key) from None


def _written_back(payload: dict[str, Any]) -> bytes | None:
    try:
        return orjson.dumps(payload)
    except orjson.JSONEncodeError:  # too deep to write: the scan below decides
        return None


# An escape of a printable ASCII character (``"mod\\u0065l"`` is ``"model"``): only such
# an escape can spell a watched key where the count of plain spellings misses it. Escapes of
# other characters (``\\u2014``, ``\\u00e9``: Python's ``json.dumps`` writes every non-ASCII
# character so) spell no key, and no longer send a body to the full scan: an 825 KB agent's
# body so written took 4 ms there (bench/resend.py --spaced).
_ESCAPED_ASCII = re.compile(rb"\\u00[2-7][0-9A-Fa-f]")


def _escapes_ascii(body: bytes) -> bool:
    return b"\\u00" in body and _ESCAPED_ASCII.search(body) is not None


_WATCHED = re.compile(
    rb'"(' + b"|".join(re.escape(k.encode()) for k in (*ROOT_WATCHED, *MESSAGE_WATCHED)) + rb')"'
)


def _more_in_raw(body: bytes, payload: dict[str, Any]) -> bool:
    raw = Tally(_WATCHED.findall(body))
    messages = payload.get("messages")
    objects = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    for key, n in raw.items():
        name = key.decode()
        held = int(name in payload) + sum(1 for m in objects if name in m)
        if n > held:
            return True
    return False


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    return out


def check_positive_int(value: Any, key: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{key}' must be a positive integer", param=key)


def check_request_basics(payload: dict[str, Any], anthropic: bool = False) -> None:
    """``model``, ``stream`` and ``tools`` as every fitted format takes them, in the client's
    own wording (Anthropic's ``field: problem``, else OpenAI's ``'field' ...``)."""

    def say(field: str, problem: str) -> str:
        return f"{field}: {problem}" if anthropic else f"'{field}' {problem}"

    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest(say("model", "is required and must be a non-empty string"), param="model")
    if "stream" in payload and not isinstance(payload["stream"], bool | None):
        raise BadRequest(say("stream", "must be a boolean"), param="stream")
    tools = payload.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    ):
        raise BadRequest(say("tools", "must be an array of objects"), param="tools")


@dataclass(kw_only=True, frozen=True, slots=True)
class CompactionAsk:
    """A compaction a request asks for, to be served by the proxy (proxy/request/
    context_compaction.py): past ``at`` input tokens (0: the proxy's own share of the
    window), the answer carries the proxy's compaction first; with ``pause``, alone (no
    model's turn); ``only``: the request is nothing but a compaction."""

    at: int
    pause: bool = False
    only: bool = False
    instructions: str | None = None
