"""The ledger: what the messages a cut removed had established, read without a model.

A summary helps only when the summarizer writes it, in time, and well. The ledger is the floor
under it: from the messages a request no longer forwards verbatim (summarized, dropped, or
rewritten), it lists, in the users' own words,

- the task: the conversation's opening user message (its first sentence, then the others no
  other entry lists, which give way before the facts);
- rules and constraints the user stated, in any sentence position ("never ...", "hard rule:",
  "it's critical that ...", "we must not ...", "treat that as absolute");
- decisions, in order, each replaced one marked as replaced by the newer one on its subject;
- facts: names bound to values and roles ("Priya owns billing", "the budget for Atlas is
  $40k"), in user turns and, for the sentences shaped as facts, in tool outputs;
- open items the user named ("we still need to ...", "next, ...");
- files read and changed by tool calls, and errors the tools reported (with whether a later
  run of the same call succeeded).

Every entry is a sentence as written (so a value is never paraphrased away). The text is a
pure function of the removed messages, so the same cut gives the same bytes on every request
(the cached prefix survives); when it outgrows its share of the budget, the least important
entries go first (replaced decisions, then files, errors, open items, facts), the newest first
within a kind (what a conversation established early is what its small talk would push out),
and a replaced decision is never shown without its replacement.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from strategies.bounded_memory import ObjectMemo
from strategies.checkpoints.cut import FileLists, track_files
from strategies.error_output import is_error_result
from strategies.messages import (
    ANSWERING,
    Message,
    called_functions,
    iter_text,
    leading_count,
    role,
    tool_call_ids,
)
from strategies.standing import REMINDER, message_states_rule, states_rule
from strategies.tokens import Counter

LEDGER_HEADER = "[Context ledger: quoted by the gateway from earlier messages no longer shown]"
DEFAULT_LEDGER_SHARE = 0.25  # of the budget, at most
MAX_TOKENS = 4000  # whatever the budget: a hundred sentences or more
SENTENCE_CHARS = 400  # a longer sentence is cut, with a marker
TASK_CHARS = 600
OUTPUT_FACTS = 12  # fact sentences read from one tool output, at most
OUTPUT_SCAN = 20000  # characters of a tool output read for facts
# Characters of removed user and tool text one ledger reads, the oldest first (about 250k
# tokens: a first sight of a conversation far past a large window). Beyond it the messages are
# not read (the task still is): the reading is Python and holds the interpreter, and a body of
# the largest admitted size (32 MiB) would take seconds. A pure bound, so a cut's ledger is
# the same bytes on every request.
SCAN_CHARS = 1_000_000

# Kinds, in the order they are rendered; KEEP is the order they give way in (first goes first).
TASK, MORE, RULE, DECISION, FACT, OPEN, ERROR, READ, CHANGED = (
    "task",
    "task_more",  # the task's other sentences, rendered after its first
    "rule",
    "decision",
    "fact",
    "open",
    "error",
    "read",
    "changed",
)
TITLES = {
    TASK: "Task",
    RULE: "Rules and constraints (as stated)",
    DECISION: "Decisions (the newest on a subject stands)",
    FACT: "Facts and names",
    OPEN: "Open items",
    ERROR: "Errors seen",
    READ: "Files read",
    CHANGED: "Files changed",
}
REPLACED = "(replaced by a later decision) "
GIVES_WAY = ("replaced", READ, CHANGED, ERROR, OPEN, MORE, FACT, DECISION, RULE, TASK)

_SPLIT = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+|\n+")
_ABBREVIATION = re.compile(
    r"(?:^|[\s(])(?:Dr|Mr|Mrs|Ms|Prof|Sr|Jr|St|Mt|Inc|Ltd|Co|Corp|vs|etc|e\.g|i\.e|approx|"
    r"No|Fig|[A-Z])\.$"
)
_BULLET = re.compile(r"^[\s\-*•>#\d.)]*")
_QUESTION = re.compile(r"[?\uff1f][\"')\]]*\s*$")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]{3,}")
# A "Task:" the user wrote before the task: the section's own title says it (not "Task: Task:").
_TASK_LABEL = re.compile(
    r"^[*_#>\s]{0,4}task[*_]{0,3}\s*[:\-\u2013\u2014][*_]{0,3}\s*(?=\S)", re.IGNORECASE
)

# A rule or constraint, anywhere in the sentence: the standing-rule reader's openings
# (strategies/standing.py), and the words people use for one.
_RULE = re.compile(
    r"\b(?:hard rule|golden rule|ground rule|one rule|the rule is|a rule|rule:|constraint|"
    r"requirement|non[- ]negotiable|no exceptions?|under no circumstances|"
    r"treat (?:that|this|it) as (?:absolute|a rule|law|final|non[- ]negotiable)|"
    r"mandatory|forbidden|prohibited|(?:is|are) not (?:allowed|permitted)|off[- ]limits|"
    r"critical(?:ly)?|crucial|essential|imperative|vital|must(?:n't)?|may not|shall not|"
    r"(?:we|you|they)\s+(?:can ?not|can't|should never|should always|"
    r"will never|need to always|have to always)|"
    r"(?:^|\b(?:we|you|please|should|must|will|to|and|but|so|then|just)\s+)(?:never|always)|"
    r"(?:^|\b(?:please|you|and|but|so|just|also)\s+)(?:do not|don't|never ever)|"
    r"(?:^|\b(?:please|always|you|and)\s+)(?:make sure|ensure|be sure to)|"
    r"no more than|no later than|at most|at least|only ever|only use|keep (?:it|them) under)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:we(?:'ll| will| are going to|'re going to)?\s+(?:go|going|stick|standardi[sz]e)\s+"
    r"(?:with|on)|let's\s+(?:go with|use|pick|stick with|switch|move|standardi[sz]e|adopt|"
    r"keep|choose|do)|(?:we|I)(?:'ve| have)?\s+(?:decided|chosen|picked|settled|agreed)|"
    r"decision|decided|we(?:'re| are)\s+(?:using|going with|switching|moving|adopting)|"
    r"switch(?:ing)?\s+(?:to|over)|go with|instead|rather than|final choice|"
    r"(?:we'll|we will|I'll|I will)\s+use|approved|settled on|going forward)\b",
    re.IGNORECASE,
)
_OVERRIDE = re.compile(
    r"\b(?:actually|instead|change of plans?|scratch that|on second thought|correction|"
    r"update:|no longer|rather than|switch(?:ing)?\s+(?:to|from|over)|revert(?:ing)?|"
    r"changed?\s+(?:my|our)\s+minds?|anymore|forget\s+(?:about|the|that)|reverse|"
    r"overrid(?:e|es|ing)|supersed(?:e|es|ing)|replac(?:e|es|ing))\b",
    re.IGNORECASE,
)
# A value that changed, said as a fact ("the branch cut is now 2024-02-25", "the launch
# slipped to May"): read as a decision that overrides, so it outlasts what it replaced.
_UPDATE = re.compile(
    r"\b(?:(?:is|are) now|now (?:is|are)|slipped|moved (?:to|up|back|out)|pushed (?:to|back|out)|"
    r"postponed|delayed|brought forward|changed to|bumped (?:to|up)|no longer)\b"
)  # on the lowercased sentence


def _overrides(text: str) -> bool:
    """Whether a decision says it overrides an earlier one ("actually", "instead", "is now")."""
    return _OVERRIDE.search(text) is not None or _UPDATE.search(text.lower()) is not None


_BINDING = re.compile(
    r"\b(?:is|are|was|were|owns?|leads?|handles?|runs?|manages?|maintains?|reports? to|"
    r"responsible for|in charge of|called|named|known as|refers? to|stands? for|means|"
    r"lives? in|based in|located|set to|equals?|costs?|due|expires?)\b"
)  # on the lowercased sentence: an IGNORECASE alternation is several times slower
# "<key>: <value>" or "<key> = <value>", with a short key.
_KEYED = re.compile(r"^[\w .'/-]{2,40}?\s*:\s*(?P<value>\S.*)$")
# A specific value: a token with a digit, a capitalised word inside the sentence, an
# identifier (snake_case, camelCase, a path, a dotted name) or a quoted string.
_NUMBER_OR_NAME = re.compile(r"\d|(?<=[\s(\"'])[A-Z][A-Za-z]+")
_SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")
_CAMEL = re.compile(r"\b[a-z]+[A-Z]\w*\b")
# (Found wherever the longer forms are: "[\w.-]+/[\w./-]+" and "\b\w+\.\w{2,4}\b" without
# the backtracking through each word.)
_PATH = re.compile(r"[\w.-]/[\w./-]")
_DOTTED = re.compile(r"\w\.\w{2,4}\b")
_QUOTED = re.compile(r"[\"“'`][^\"”'`]{2,60}[\"”'`]")


def _specific(text: str) -> bool:
    """Whether ``text`` holds a specific value: a token with a digit, a capitalised word
    inside it, an identifier (snake_case, camelCase, a path, a dotted name) or a quoted
    string. Each pattern runs only where its characters are (one pattern of them all
    backtracks through every word of a long sentence)."""
    return bool(
        _NUMBER_OR_NAME.search(text)
        or ("_" in text and _SNAKE.search(text))
        or (not text.islower() and _CAMEL.search(text))
        or ("/" in text and _PATH.search(text))
        or _DOTTED.search(text)
        or (any(q in text for q in "\"“'`") and _QUOTED.search(text))
    )


# A fact as tool outputs and documents state one: "the <attribute> for/of <Name> is <value>",
# "<Name>'s <attribute> is <value>", "<key>: <value>" with a named key.
_OUTPUT_FACT = re.compile(
    r"\b(?:for|of)\s+[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*\s+(?:is|are|was|were)\s+\S|"
    r"\b[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*'s\s+[\w\s]{2,40}\s+(?:is|are|was)\s+\S"
)
_OPEN = re.compile(
    r"\b(?:todo|to-do|next step|next,|next up|next thing|after that|then we|need to|needs to|"
    r"have to|has to|still (?:need|have)|remaining|pending|follow[- ]up|blocked on|"
    r"open question|action item|let's|we should|please|I want|I'd like|we want|the goal|"
    r"plan to|planning to|going to|we'll owe|owe them|fall through the cracks|remind me|"
    r"will (?:review|own|handle|lead|take|approve|sign off|test|write|deploy|fix|check|send|"
    r"run|draft|do|look at|pair))\b"
    # An imperative: the sentence opens with what to do, after a short lead-in ("For the alert,
    # use ...", "Then look at ...").
    r"|^(?:(?:for|on|in|about|with|once|when|after|before)\b[^,.;:]{0,60}[,;:]\s+|"
    r"(?:then|also|now|next|and|so|ok|okay|please),?\s+)?(?:send|write|draft|email|call|ask|schedule|book|file|open|"
    r"create|update|remove|add|fix|check|review|deploy|ship|merge|run|prepare|set up|set|make|"
    r"move|rename|migrate|document|reply|ping|tell|remember|use|look at|page|keep|put|start|"
    r"stop|try|test|build|implement|investigate|find|compare|switch|escalate|notify|cc)\b",
    re.IGNORECASE,
)
# A line of code or a pasted trace, not a sentence a person wrote.
_CODE = re.compile(
    r"[(){}\[\]]|==|=>|->|^\s*(?:def|class|return|import|from|raise|assert|if|for|while|"
    r"select|insert|update|const|let|var|function)\b|\wError:|^\s*File \"",
)
_REQUEST_QUESTION = re.compile(r"^(?:can|could|would|will) you\b|^please\b", re.IGNORECASE)
_STOP = frozenset(
    {
        "that",
        "this",
        "with",
        "from",
        "have",
        "they",
        "them",
        "will",
        "would",
        "should",
        "could",
        "about",
        "there",
        "their",
        "what",
        "when",
        "which",
        "while",
        "into",
        "also",
        "just",
        "like",
        "then",
        "than",
        "were",
        "been",
        "being",
        "make",
        "made",
        "sure",
        "only",
        "really",
        "actually",
        "instead",
        "rather",
        "let's",
        "lets",
        "going",
        "decided",
        "decision",
        "switch",
        "switching",
        "use",
        "using",
        "we'll",
        "we're",
        "everything",
        "anything",
        "something",
        "please",
        "okay",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    kind: str
    text: str
    at: int  # the message's index: entries are rendered in conversation order within a kind
    replaced: bool = False


def sentences(text: str) -> list[str]:
    """``text``'s sentences, bullets and numbering stripped, a client's reminders left out."""
    if "<system-reminder>" in text:
        text = REMINDER.sub("", text)
    pieces: list[str] = []
    for raw in _SPLIT.split(text):
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] += " " + raw  # "Dr. Sarah Chen" is one name, not two sentences
        else:
            pieces.append(raw)
    out = []
    for raw in pieces:
        s = _BULLET.sub("", raw).strip()
        if len(s) >= 8:
            out.append(s if len(s) <= SENTENCE_CHARS else s[: SENTENCE_CHARS - 1] + "…")
    return out


def read_user(text: str, standing: bool | None = None) -> list[tuple[str, str]]:
    """The ledger's (kind, sentence) pairs in a user's message (``standing``: whether it states
    a standing rule, when known). Each pattern runs only on the sentences that hold one of its
    words, and only when the whole text does (plain substring tests: a long conversation's
    every user message is read once)."""
    out = []
    if standing is None:
        standing = states_rule(text)
    whole = text.lower()
    short = len(text) <= SHORT_CHARS  # the user speaking: what is pasted runs longer
    rules = standing or _has(whole, RULE_WORDS)
    decisions = _has(whole, DECISION_WORDS)
    opens = _has(whole, OPEN_WORDS)
    for s in sentences(text):
        low = s.lower()
        question = bool(_QUESTION.search(s))
        if question and not _REQUEST_QUESTION.search(s):
            continue
        first = low.split(" ", 1)[0].strip(",;:")
        if not question and (
            (
                rules
                and _has(low, RULE_WORDS)
                and _RULE.search(s)
                and (short or _addressed(low, first))
            )
            or (standing and states_rule(s))
            or (first in INSTRUCTION_OPENERS and _INSTRUCTION.search(s))
        ):
            out.append((RULE, s))
        elif (
            not question
            and decisions
            and _has(low, DECISION_WORDS)
            and _DECISION.search(s)
            and (short or _addressed(low, first))
        ):
            out.append((DECISION, s))
        elif not question and _states_fact(s, low):
            out.append((DECISION if _UPDATE.search(low) else FACT, s))
        elif ((opens and _has(low, OPEN_WORDS)) or first in OPENERS) and _OPEN.search(s):
            out.append((OPEN, s))
    return out


def _has(low: str, words: tuple[str, ...]) -> bool:
    return any(w in low for w in words)


def _addressed(low: str, first: str) -> bool:
    """Whether a sentence that reads as a rule or a decision is the user's own, about the work
    at hand: an imperative ("never...", "make sure...", "use..."), the user or the team
    speaking ("we", "our", "let's", "you", "I want"), a rule's own words ("hard rule",
    "mandatory"), or the work named as theirs ("this project", "my essay"). Prose the user
    pasted ("Contemporary managers must wrestle with...", "Instead, he preaches...") is none
    of these: it is left to the summary and the verbatim turns. Asked only of a long message
    (``SHORT_CHARS``); measured by bench/ledger_reads.py."""
    if first in _LEAD_INS:  # "Also, never...", "And please make sure..."
        words = low.split(None, 3)
        first = words[1].strip(",;:") if len(words) > 1 else ""
        if first in _LEAD_INS and len(words) > 2:
            first = words[2].strip(",;:")
    return (
        first in IMPERATIVE_OPENERS
        or _ADDRESSED.search(low) is not None
        or _RULE_VOCABULARY.search(low) is not None
    )


# The words without which each pattern cannot match (lowercase substrings).
RULE_WORDS = (
    "rule", "constraint", "requirement", "negotiable", "exception", "circumstances", "absolute",
    "mandatory", "forbidden", "prohibited", "allowed", "permitted", "off-limits", "off limits",
    "critical", "crucial", "essential", "imperative", "vital", "must", "may not", "shall not",
    "not", "n't", "never", "always", "sure", "ensure", "no more", "no later", "at most",
    "at least", "only ever", "only use", "keep it under", "keep them under",
)  # fmt: skip
DECISION_WORDS = (
    "go with", "going with", "stick", "standardi", "let's", "decided", "decision", "chose",
    "chosen", "picked", "settled", "agreed", "using", "switch", "instead", "rather than",
    "final choice", "'ll use", "will use", "approved", "going forward", "adopt",
)  # fmt: skip
OPEN_WORDS = (
    "todo", "to-do", "next", "after that", "then we", "need", "have to", "has to", "still",
    "remaining", "pending", "follow", "blocked on", "open question", "action item", "let's",
    "should", "please", "want", "i'd like", "goal", "plan", "going to", "owe",
    "fall through", "remind me", "will ",
)  # fmt: skip
# A sentence that opens with one of these may be an imperative (or a lead-in to one).
_OPENER_WORDS = (
    "send", "write", "draft", "email", "call", "ask", "schedule", "book", "file", "open",
    "create", "update", "remove", "add", "fix", "check", "review", "deploy", "ship", "merge",
    "run", "prepare", "set", "make", "move", "rename", "migrate", "document", "reply", "ping",
    "tell", "remember", "use", "look", "page", "keep", "put", "start", "stop", "try", "test",
    "build", "implement", "investigate", "find", "compare", "switch", "escalate", "notify",
    "cc", "for", "on", "in", "about", "with", "once", "when", "after", "before", "then",
    "also", "now", "next", "and", "so", "ok", "okay", "please",
)  # fmt: skip
OPENERS = frozenset(_OPENER_WORDS)


# A user message this short is the user's own words, not a document pasted in: its rules and
# decisions need not be addressed (``_addressed``) to be read.
SHORT_CHARS = 600
# A sentence that opens with one of these is an imperative, or a rule's lead-in.
_LEAD_INS = frozenset(
    ("for", "on", "in", "about", "with", "once", "when", "after", "before", "then", "also",
     "now", "next", "and", "so", "ok", "okay", "please", "but", "oh", "btw", "plus")
)  # fmt: skip
IMPERATIVE_OPENERS = frozenset(
    (
        *(w for w in _OPENER_WORDS if w not in _LEAD_INS),
        "do", "don't", "dont", "never", "always", "ensure", "avoid", "only", "no", "note",
        "important", "critical", "crucial", "rule", "constraint", "requirement", "must",
        "pls", "kindly", "change", "replace", "rename", "pick", "choose", "go",
        "stick", "drop", "scratch", "reply", "respond", "answer",
        "restate", "end", "show", "wait", "give", "cite", "include", "explain", "mention",
        "summarize", "translate", "format", "limit", "focus", "treat", "be", "stay", "refer",
    )
)  # fmt: skip
_ADDRESSED = re.compile(
    r"\b(?:you|your|yours|u|we|we're|we've|we'll|our|ours|us|let's|lets)\b"
    r"|\bi(?:'d| would)? (?:want|need|like|prefer|require|expect|insist|don't want|do not want|"
    r"decided|chose|picked|settled|agreed|will|'ll|have decided|'ve decided)\b"
    r"|\bi'(?:d|ll|ve) (?:like|prefer|rather|use|go|decided|chosen|picked|settled)\b"
    r"|\b(?:this|my) (?:project|repo|repository|codebase|session|conversation|chat|app|"
    r"application|service|api|code|script|function|task|assignment|course|essay|article|post|"
    r"answer|response|reply|output|document|report|email|letter|story|program|website|site|"
    r"design|plan|team|product|book|paper|thesis|game|campaign|prompt)s?\b"
)
_RULE_VOCABULARY = re.compile(
    r"\b(?:hard rule|golden rule|ground rule|the rule is|rule:|constraints?:|requirements?:|"
    r"non[- ]negotiable|no exceptions?|under no circumstances|mandatory|forbidden|prohibited|"
    r"off[- ]limits|not (?:allowed|permitted)|treat (?:that|this|it) as)"
)
# A standing instruction in an imperative's own shape: "When you cite something, use the
# primary source", "Before you answer, restate my question", "Reply in bullet points only",
# "End every reply with ..." (conpact's side constraints said bare: no "must", no "never").
INSTRUCTION_OPENERS = frozenset(
    (
        "when", "whenever", "before", "after", "if", "reply", "respond", "answer", "write",
        "format", "end", "start", "begin", "keep", "put", "give", "use", "cite", "list",
        "include", "always", "please",
    )
)  # fmt: skip
_INSTRUCTION = re.compile(
    r"^(?:please\s+)?(?:"
    r"(?:when|whenever|before|after|each time|every time|any time|if)\s+(?:you|i)\b"
    r"[^.!?]{0,160}?,\s*(?:please\s+)?(?:always\s+)?"
    r"(?:use|pick|prefer|choose|restate|end|start|begin|reply|respond|answer|show|wait|ask|"
    r"give|cite|say|list|include|avoid|explain|summari[sz]e|mention|format|write|put|add|"
    r"keep|mark|label|check|confirm|double-check|run|tell|let|stop|make|do|don't|never|"
    r"always)\b"
    r"|(?:reply|respond|answer|write|format|end|start|begin|keep|put|give|use|cite|list|"
    r"include)\b[^.!?]*\b(?:every|each|always|never|only)\b[^.!?]*"
    r"\b(?:repl(?:y|ies)|answers?|responses?|messages?|outputs?)\b"
    r"|(?:reply|respond|answer)\b[^.!?]*\bonly\b)",
    re.IGNORECASE,
)


def _states_fact(sentence: str, low: str = "") -> bool:
    """A name bound to a value or a role: a binding verb and a specific value (a number, a
    name, an identifier, a quoted string) after the sentence's first word, or a short key
    with a specific value."""
    # The cheap tests first: most sentences hold no specific value at all.
    if not _specific(sentence[1:]):
        return False
    keyed = _KEYED.match(sentence)
    if keyed is not None:
        found = _specific(" " + keyed.group("value"))
    else:
        found = _BINDING.search(low or sentence.lower()) is not None
    return found and _CODE.search(sentence) is None


def read_output(text: str) -> list[str]:
    """The fact-shaped sentences of a tool's output (at most ``OUTPUT_FACTS``)."""
    out: list[str] = []
    text = text[:OUTPUT_SCAN]
    # Most outputs: no binding verb at all (plain substring tests), or one scan, no sentences.
    if not _has(text, _OUTPUT_VERBS) or _OUTPUT_FACT.search(text) is None:
        return out
    for s in sentences(text):
        if _OUTPUT_FACT.search(s) and not _QUESTION.search(s):
            out.append(s)
            if len(out) == OUTPUT_FACTS:
                break
    return out


_OUTPUT_VERBS = (" is ", " are ", " was ", " were ", " is\n", " are\n", " was\n", " were\n")


def _reading(message: Message, output: bool) -> list[tuple[str, str]]:
    """``read_user`` of a user message's texts, or the facts ``read_output`` finds in a tool's
    output, remembered by the message object (every fresh cut of a conversation reads the same
    removed messages again)."""
    known = _READ.get(message)
    if known is not None:
        return [(k, s) for k, s in orjson.loads(known)]
    texts = list(iter_text(message))
    if output:
        pairs = [(FACT, s) for s in read_output("\n".join(texts))]
    else:
        standing = message_states_rule(message)  # remembered: the engine reads it too
        pairs = [p for t in texts for p in read_user(t, standing)]
    _READ.remember(message, orjson.dumps(pairs), sum(len(t) for t in texts))
    return pairs


_READ = ObjectMemo()


# A user message that is wholly one tagged block is the client's context, not the user's task:
# Codex's <environment_context> (its cwd and shell) comes before the task in every session.
CLIENT_BLOCK = re.compile(r"\s*<([A-Za-z_][\w-]*)>.*</\1>\s*", re.DOTALL)


def _client_context(message: Message) -> bool:
    text = "".join(iter_text(message))
    return CLIENT_BLOCK.fullmatch(text) is not None


def _task(message: Message, at: int, listed: set[str]) -> list[Entry]:
    """The task: the opening user message's first sentence (``TASK``), then its other
    sentences that no other entry lists (``MORE``: they give way before the facts), up to
    ``TASK_CHARS`` in all. A message of no sentence is its text."""
    text = REMINDER.sub("", " ".join(t.strip() for t in iter_text(message))).strip()
    parts = sentences(text) or ([text] if text else [])
    if not parts:
        return []
    head = parts[0] if len(parts[0]) <= TASK_CHARS else parts[0][: TASK_CHARS - 1] + "…"
    out = [Entry(kind=TASK, text=head, at=at)]
    left = TASK_CHARS - len(head)
    for part in parts[1:]:
        if part in listed:
            continue
        if len(part) + 1 > left:
            break
        out.append(Entry(kind=MORE, text=part, at=at))
        left -= len(part) + 1
    return out


def _text_size(message: Message) -> int:
    return sum(len(t) for t in iter_text(message))


def memories() -> tuple[ObjectMemo, ObjectMemo]:
    """The messages' readings and the files their calls name, for the proxy's memory budget."""
    return _READ, _FILES


def extract(
    messages: Sequence[Message],
    removed: Iterable[int],
    continuing: frozenset[int] = frozenset(),
    scan_chars: int = SCAN_CHARS,
) -> list[Entry]:
    """The entries of ``messages[i]`` for each index in ``removed`` (in order). User messages in
    ``continuing`` (ids: a client's own reminders in its tool loop) are not the user's. The
    user and tool texts are read, the oldest first, up to ``scan_chars`` characters.

    Remembered for the last few sets of message objects read (a cut on the cache grid
    removes the same messages request after request, and a fit reserves room for the ledger
    before it makes it): the entries are a function of the messages alone."""
    picked = sorted(set(removed))
    first_user = next(
        (i for i, m in enumerate(messages) if role(m) == "user" and not _client_context(m)), -1
    )
    held = [messages[i] for i in picked]
    if first_user >= 0:
        held.append(messages[first_user])
    key = (tuple(map(id, held)), first_user in picked, continuing, scan_chars)
    with _EXTRACTS_LOCK:
        hit = _EXTRACTS.get(key)
        if hit is not None:
            _EXTRACTS.move_to_end(key)
            return list(hit[1])
    entries, left = _extract(messages, picked, first_user, continuing, scan_chars)
    if left < 0:  # a body past the scan: not held (the held texts stay within the scan's size)
        return entries
    with _EXTRACTS_LOCK:
        # Holding the objects keeps their ids from being reused while the key stands.
        _EXTRACTS[key] = (held, tuple(entries))
        while len(_EXTRACTS) > EXTRACTS_KEPT:
            _EXTRACTS.popitem(last=False)
    return entries


EXTRACTS_KEPT = 8
_EXTRACTS: OrderedDict[tuple[object, ...], tuple[list[Message], tuple[Entry, ...]]] = OrderedDict()
_EXTRACTS_LOCK = threading.Lock()


def _extract(
    messages: Sequence[Message],
    picked: list[int],
    first_user: int,
    continuing: frozenset[int],
    scan_chars: int,
) -> tuple[list[Entry], int]:
    """``extract``'s entries, and the scan's characters left (negative: it stopped)."""
    entries: list[Entry] = []
    seen: set[str] = set()

    def add(entry: Entry) -> None:
        key = entry.text.lower()
        if key not in seen:
            seen.add(key)
            entries.append(entry)

    calls: dict[str, tuple[str, str]] = {}  # tool_call_id -> (name, arguments)
    errors: dict[tuple[str, str], str] = {}  # a call -> its newest error entry's text
    fixed: set[str] = set()  # error entries a later run of the same call answered
    scan = scan_chars
    read: set[str] = set()
    changed: set[str] = set()
    for i in picked:
        m = messages[i]
        kind = m.get("role")
        if kind == "user" and id(m) not in continuing:
            scan -= _text_size(m)
            readings = _reading(m, False) if scan >= 0 else []
            head = ""
            if i == first_user:
                task = _task(m, i, {s for _, s in readings})
                head = task[0].text if task else ""
                for entry in task:
                    add(entry)
            for k, s in readings:
                if s != head:  # the task quotes it already
                    add(Entry(kind=k, text=s, at=i))
        elif kind == "assistant":
            if m.get("tool_calls") or m.get("function_call"):
                for call_id, fn in zip(tool_call_ids(m), called_functions(m), strict=False):
                    calls[call_id] = (str(fn.get("name", "")), str(fn.get("arguments", ""))[:120])
            files = _files(m)
            read.update(files.read)
            changed.update(files.modified)
        elif kind in ANSWERING:
            call = calls.get(str(m.get("tool_call_id")), ("tool", ""))
            if is_error_result(m):
                line = _error_line("\n".join(iter_text(m)))
                if line:
                    errors[call] = f"{_call_words(call)}: {line}"
                    fixed.discard(errors[call])
                    add(Entry(kind=ERROR, text=errors[call], at=i))
            elif call in errors:
                fixed.add(errors[call])
            scan -= min(_text_size(m), OUTPUT_SCAN)
            for k, s in _reading(m, True) if scan >= 0 else ():
                add(Entry(kind=k, text=s, at=i))
    if fixed:
        entries = [
            Entry(kind=e.kind, text=e.text + " (a later run succeeded)", at=e.at)
            if e.kind == ERROR and e.text in fixed
            else e
            for e in entries
        ]
    files = FileLists(tuple(sorted(read - changed)), tuple(sorted(changed)))
    entries += _file_entries(files, picked[-1] if picked else 0)
    return _mark_replaced(entries), scan


def _files(message: Message) -> FileLists:
    """The files an assistant message's calls read and change, remembered by the message."""
    if not message.get("tool_calls") and not message.get("function_call"):
        return FileLists()
    known = _FILES.get(message)
    if known is not None:
        read, changed = orjson.loads(known)
        return FileLists(tuple(read), tuple(changed))
    files = track_files([message])
    raw = orjson.dumps([files.read, files.modified])
    _FILES.remember(message, raw, len(raw))
    return files


_FILES = ObjectMemo()


def _file_entries(files: FileLists, at: int) -> list[Entry]:
    out = []
    if files.read:
        out.append(Entry(kind=READ, text=", ".join(files.read), at=at))
    if files.modified:
        out.append(Entry(kind=CHANGED, text=", ".join(files.modified), at=at))
    return out


def _call_words(call: tuple[str, str]) -> str:
    name, args = call
    return f"{name} {args}".strip() if args else name


def _error_line(text: str) -> str:
    """The line of an error output that says what failed: its first line naming an error."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        low = ln.lower()
        if any(w in low for w in ("error", "fail", "panic", "fatal", "exception", "exit")):
            return ln[:SENTENCE_CHARS]
    return lines[-1][:SENTENCE_CHARS] if lines else ""


def _subjects(text: str) -> set[str]:
    """What a decision is about: its common words (a capitalised name or a value is what was
    chosen, not the subject: "use Redis for the cache" is about the cache)."""
    return {w for w in _WORD.findall(text) if w.isalpha() and w.islower()} - _STOP


def _mark_replaced(entries: list[Entry]) -> list[Entry]:
    """Each decision that a later one overrides on the same subject (a content word in common,
    the later one saying it overrides: "actually", "instead", "switch to", ...) is marked
    replaced."""
    decisions = [n for n, e in enumerate(entries) if e.kind == DECISION]
    replaced: set[int] = set()
    for pos, n in enumerate(decisions):
        later = entries[n]
        if not _overrides(later.text):
            continue
        words = _subjects(later.text)
        for m in decisions[:pos]:
            if m not in replaced and words & _subjects(entries[m].text):
                replaced.add(m)
    if not replaced:
        return entries
    return [
        Entry(kind=e.kind, text=e.text, at=e.at, replaced=True) if n in replaced else e
        for n, e in enumerate(entries)
    ]


def render(entries: Sequence[Entry]) -> str:
    """The ledger's text: sections in a fixed order, entries in conversation order."""
    parts = [LEDGER_HEADER]
    for kind in TITLES:
        picked = [e for e in entries if e.kind == kind or (kind == TASK and e.kind == MORE)]
        if not picked:
            continue
        if kind == TASK:
            text = " ".join(e.text for e in picked)
            parts.append(f"{TITLES[kind]}: " + _TASK_LABEL.sub("", text, count=1))
            continue
        if kind in (READ, CHANGED):
            parts.append(f"{TITLES[kind]}: " + "; ".join(e.text for e in picked))
            continue
        lines = [
            f"- {'(replaced by a later decision) ' if e.replaced else ''}{e.text}" for e in picked
        ]
        parts.append(f"{TITLES[kind]}:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def fitted(entries: Sequence[Entry], cap: int, counter: Counter) -> str | None:
    """The ledger's text within ``cap`` tokens (as a message's content), the entries that give
    way first left out first (``GIVES_WAY``; the newest first within a kind); None when not
    even the task's start fits, or there is nothing to say.

    How many entries go is searched for between two estimates from their length (a long
    conversation's ledger may hold thousands of entries), each step counting one text of
    about the cap's size: the tokenizer never reads the whole of a large ledger."""
    if not entries or cap <= 0:
        return None
    # Within a kind the newest go first: what a conversation established early is what its
    # later small talk would push out.
    order = sorted(range(len(entries)), key=lambda n: (_gives_way(entries[n]), -entries[n].at, -n))

    def kept(k: int) -> list[Entry]:
        gone = set(order[:k])
        return [e for n, e in enumerate(entries) if n not in gone]

    def shed(chars_per_token: int) -> int:
        """How many go for an estimate at ``chars_per_token`` to fit."""
        total = HEADER_ESTIMATE + sum(_estimate(e, chars_per_token) for e in entries)
        k = 0
        while total > cap and k < len(order):
            total -= _estimate(entries[order[k]], chars_per_token)
            k += 1
        return k

    def fits(k: int) -> str | None:
        left = kept(k)
        if not left:
            return None
        text = render(left)
        return text if _cost(text, counter) <= cap else None

    last = len(order) - 1  # at least one entry stays
    # An estimate under any text's count, and one over most.
    low, high = min(shed(6), last), min(shed(2), last)
    found = fits(high)
    while found is None:  # a text denser than the estimate
        if high == last:
            return _task_only(entries, cap, counter)
        low, high = high + 1, min(last, high + max(1, high // 2))
        found = fits(high)
    while low < high:  # the fewest that must go
        mid = (low + high) // 2
        text = fits(mid)
        if text is None:
            low = mid + 1
        else:
            high, found = mid, text
    return found


HEADER_ESTIMATE = 40  # the header and the section titles, in tokens


def _estimate(entry: Entry, chars_per_token: int = 3) -> int:
    return len(entry.text) // chars_per_token + 3


def _task_only(entries: Sequence[Entry], cap: int, counter: Counter) -> str | None:
    """The ledger of the task alone, its text cut to what ``cap`` leaves (a small window's
    ledger still says what the work is for); None when not even its start fits."""
    task = next((e for e in entries if e.kind == TASK), None)
    if task is None:
        return None
    room = cap - _cost(render([Entry(kind=TASK, text="…", at=task.at)]), counter)
    if room < 8:
        return None
    chars = min(len(task.text), room * 3)
    while chars >= 16:
        text = render([Entry(kind=TASK, text=task.text[: chars - 1] + "…", at=task.at)])
        if _cost(text, counter) <= cap:
            return text
        chars = chars * 3 // 4
    return None


def _gives_way(entry: Entry) -> float:
    """An entry's rank in ``GIVES_WAY``; a decision that overrides an earlier one stays as long
    as the rules (the one it replaced may be shown verbatim, pinned as a standing rule)."""
    if entry.replaced:
        return GIVES_WAY.index("replaced")
    if entry.kind == DECISION and _overrides(entry.text):
        return GIVES_WAY.index(RULE) + 0.5
    return GIVES_WAY.index(entry.kind)


def _cost(text: str, counter: Counter) -> int:
    return counter.message({"role": "user", "content": text})


def removed_indices(
    messages: Sequence[Message], forwarded: Sequence[Message], lead: int | None = None
) -> list[int]:
    """The indices (after the leading instructions) of ``messages`` not forwarded as they were
    sent: dropped, summarized or rewritten."""
    start = leading_count(messages) if lead is None else lead
    kept = {id(m) for m in forwarded}
    return [i for i in range(start, len(messages)) if id(messages[i]) not in kept]
