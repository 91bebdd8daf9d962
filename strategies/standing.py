"""Standing rules: a user message that states a rule for the rest of the conversation ("from
now on, answer in French", "for the rest of this session, never ...") is kept as if pinned,
without a ``pin`` rule, up to a share of the budget.

A message states one when a sentence of it opens with a scope ("from now on", "going forward",
"for the rest of this session/conversation/chat", "until I say otherwise", "from this point
on") or an imperative "always ..."/"never ..."/"don't ever ...", in English, French, German,
Spanish, Portuguese, Italian, Chinese and Japanese. A question ("can you always ...?") is not a
rule. The test is on the text alone, so the same messages are kept in every request (the
cached prefix survives). When the rules take more than their share, the newest are kept: a
later rule may replace an earlier one.

The ids feed the pinned set (strategies/engine.py, and the summaries' context), so a rule is
never dropped, trimmed or summarized while its share holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from strategies.bounded_memory import ObjectMemo
from strategies.messages import Message, iter_text, leading_count
from strategies.tokens import Counter

# A sentence opens at the start of the text, after a line break, or after . ! ? ; : and
# space; a bullet or a quote may come first.
_ENDS = ".!?\n\u3002\uff01\uff1f"  # and the CJK full stop, exclamation and question marks
_OPEN = r"(?:^|[" + _ENDS + r";:]\s*)[\s\-*•>\"'“«(]*"
_SCOPE = "|".join(
    [
        # English
        r"from now on\b",
        r"from here on(?: out)?\b",
        r"from this point (?:on|forward)\b",
        r"going forward\b",
        r"for the (?:rest|remainder) of (?:this|the|our) (?:session|conversation|chat|thread)\b",
        r"for all (?:future|further|subsequent) (?:replies|responses|answers|messages)\b",
        r"until (?:I say otherwise|further notice|I tell you otherwise)\b",
        r"(?:please\s+)?(?:always|never)\s+(?!mind\b)[a-z]+",
        r"(?:please\s+)?(?:do not|don't) ever\b",
        # French
        r"(?:à|a) partir de maintenant\b",
        r"dor(?:é|e)navant\b",
        r"d(?:é|e)sormais\b",
        r"pour (?:le reste|la suite) de (?:cette|la|notre) (?:session|conversation|discussion)\b",
        r"(?:toujours|ne jamais)\s+\w+",
        # German
        r"ab (?:jetzt|sofort)\b",
        r"von nun an\b",
        r"f(?:ü|ue)r den rest (?:dieser|der|unserer) (?:sitzung|unterhaltung|konversation)\b",
        r"(?:immer|niemals|nie)\s+\w+",
        # Spanish, Portuguese, Italian
        r"(?:a partir de ahora|de ahora en adelante|desde ahora)\b",
        r"por el resto de (?:esta|la) (?:sesi(?:ó|o)n|conversaci(?:ó|o)n)\b",
        r"(?:a partir de agora|de agora em diante|daqui (?:em|para a) diante)\b",
        r"(?:d'ora in poi|da ora in poi|d'ora in avanti)\b",
        r"(?:siempre|nunca|sempre|mai)\s+\w+",
    ]
)
_CJK = (
    r"(?:从现在(?:开始|起)|今后|以后(?:请|都)|在(?:本次|接下来的)(?:会话|对话)中"
    r"|これから(?:は|ずっと)|今後は|以降は|常に|絶対に)"
)
STANDING = re.compile(f"{_OPEN}(?:{_SCOPE})|{_CJK}", re.IGNORECASE)
REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|$)", re.DOTALL)
QUESTION = re.compile("[?\uff1f]\\s*$")
DEFAULT_SHARE = 0.15  # of the budget, at most, for standing rules kept without a pin


def states_rule(text: str) -> bool:
    """Whether ``text`` states a standing rule (a sentence that opens with a scope or an
    imperative always/never, and is not a question). What a client wrapped in its own tags
    (Claude Code's ``<system-reminder>``: "NEVER create files unless ...") is the client's,
    not the user's: it is not read."""
    if "<system-reminder>" in text:
        text = REMINDER.sub("", text)
    for found in STANDING.finditer(text):
        end = _sentence_end(text, found.end())
        if not QUESTION.search(text[found.start() : end + 1]):
            return True
    return False


def standing_ids(
    messages: Sequence[Message],
    counter: Counter,
    budget: int,
    share: float = DEFAULT_SHARE,
    continuing: frozenset[int] = frozenset(),
) -> frozenset[int]:
    """Ids of the user messages stating standing rules, newest first while they take at most
    ``share`` of ``budget`` (the last user message is kept anyway, and not counted). The user
    messages in ``continuing`` (ids: a client's reminders inside its tool loop, see
    strategies/rules.py: running_task) are the client's, not the user's: never taken."""
    if share <= 0:
        return frozenset()
    last = next((i for i in range(len(messages) - 1, -1, -1) if _user(messages[i])), -1)
    lead = leading_count(messages)
    # Never more than what the instructions and the current turn leave: a rule kept must not
    # make a request that fits without it fail.
    kept = sum(counter.message(m) for m in (*messages[:lead], *messages[max(last, lead) :]))
    room = min(int(budget * share), budget - kept - counter.priming)
    out: set[int] = set()
    for i in range(last - 1, lead - 1, -1):
        m = messages[i]
        if not _user(m) or id(m) in continuing or not message_states_rule(m):
            continue
        cost = counter.message(m)
        if cost <= room:
            out.add(id(m))
            room -= cost
    return frozenset(out)


def message_states_rule(message: Message) -> bool:
    """Whether a text of ``message`` states a standing rule. Remembered by the message object:
    every fit asks of each user message, and a conversation's next request holds the same
    objects (proxy/formats/reused_items.py)."""
    known = _READ.get(message)
    if known is not None:
        return known == RULE
    texts = list(iter_text(message))
    rule = any(states_rule(t) for t in texts)
    _READ.remember(message, RULE if rule else NOT_RULE, sum(len(t) for t in texts))
    return rule


RULE, NOT_RULE = b"\x01", b""
_READ = ObjectMemo()  # each user message's reading, by the message object


def memory() -> ObjectMemo:
    """The user messages' readings, for the proxy's memory budget (proxy/observe/memory.py)."""
    return _READ


def _user(message: Message) -> bool:
    return message.get("role") == "user"


def _sentence_end(text: str, start: int) -> int:
    """The index of the end of the sentence running at ``start``."""
    for k in range(start, len(text)):
        if text[k] in _ENDS:
            return k
    return len(text) - 1
