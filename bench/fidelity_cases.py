"""The fidelity bench's conversations (bench/fidelity.py): CompactBench cases from our own
templates, and multi-needle haystacks from ``hard-needle``, as chat messages.

A template (``bench/fidelity_templates/*.yaml``, CompactBench's DSL) gives the turns that
matter, the DSL's short distractor turns between them and the evaluation items. Longer
off-topic developer turns (``bench/fidelity_filler.yaml``) are laid after the distractor
blocks and at the end until the conversation reaches its size; what the bench sends after
that, to reach three trim cycles, is ``growth``: more off-topic turns, each run of them closed
by one of CompactBench's continuation prompts ("What should we tackle next?").

Every item's check must pass on the conversation and on no message outside the turns that
state it (``problems``): a value that also appears in a filler turn, the system prompt or a
continuation would be counted as kept when it was lost. Seeds whose generated values collide
(two owners with the same name) are passed over.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from itertools import count as count_up
from itertools import islice, repeat
from pathlib import Path
from typing import Any

import yaml
from compactbench.contracts import EvaluationItem, EvaluationItemType, GeneratedCase
from compactbench.dsl import (
    DifficultyLevel,
    TemplateDefinition,
    load_suite,
    resolve_variables,
    substitute,
    validate_template,
)
from compactbench.engine.generation import generate_case
from compactbench.runner.continuation import (
    _CONTINUATION_PROMPTS as CONTINUATIONS,  # what select_continuation_prompt picks from
)
from compactbench.runner.continuation import select_continuation_prompt
from hard_needle import generate_hard_example

from proxy.windows.tokenizers import get_encoding
from strategies.tokens import ChatCounter

HERE = Path(__file__).resolve().parent
SYSTEM = "You are a senior engineer pairing with the user on their team's services."
# Tokens (o200k) a base conversation reaches with filler turns (about 100 a pair), by difficulty.
SIZE = {DifficultyLevel.HARD: 2400, DifficultyLevel.ELITE: 3200}
# Filler pairs after each distractor block, by difficulty (elite buries deeper).
BURY = {DifficultyLevel.HARD: 0, DifficultyLevel.ELITE: 1}
NEEDLES = {DifficultyLevel.HARD: 3, DifficultyLevel.ELITE: 4}
ANSWERS = (
    "I'd finish the change in flight, run the suite, and then pick up whatever is still open.",
    "Let's close out the current change first; after that the open items are next.",
    "The current work comes first, then I'd review what's still pending.",
)
Message = dict[str, Any]
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, kw_only=True)
class Case:
    """One conversation: ``messages`` (system first), which of them state what the items
    check (``stating``), the items, and the seed of its growth."""

    case_id: str
    family: str
    messages: list[Message]
    stating: frozenset[int]
    items: list[EvaluationItem]
    seed: int

    def growth(self) -> Iterator[Message]:
        """Messages to send after ``messages``, for ever: off-topic pairs, then a
        continuation prompt and a short answer."""
        rng = random.Random(self.seed)
        for cycle in count_up(1):
            for pair in rng.sample(filler(), 2):
                yield from pair
            yield {"role": "user", "content": select_continuation_prompt(self.seed, cycle)}
            yield {"role": "assistant", "content": rng.choice(ANSWERS)}


@cache
def filler() -> list[tuple[Message, Message]]:
    pairs = yaml.safe_load((HERE / "fidelity_filler.yaml").read_text())
    return [
        ({"role": "user", "content": p["user"]}, {"role": "assistant", "content": p["assistant"]})
        for p in pairs
    ]


@cache
def templates() -> list[TemplateDefinition]:
    out = load_suite(HERE / "fidelity_templates")
    for t in out:
        validate_template(t)
    return out


def normalized(text: str) -> str:
    """CompactBench's normalization (scoring/checks.py): lower case, whitespace collapsed."""
    return _SPACE.sub(" ", text.strip().lower())


def text_of(message: Message) -> str:
    """What a model reads of a message: its text parts and its tool calls' arguments."""
    content = message.get("content")
    parts = [content] if isinstance(content, str) else []
    if isinstance(content, list):
        parts += [p.get("text", "") for p in content if isinstance(p, dict)]
    for call in message.get("tool_calls") or []:
        parts.append(call["function"]["name"] + " " + call["function"].get("arguments", ""))
    return "\n".join(parts)


def check_strings(item: EvaluationItem) -> list[str]:
    """The texts an item looks for: its value(s) and the decision it replaces."""
    e = item.expected
    return [
        *([e["value"]] if "value" in e else []),
        *e.get("values", []),
        *([e["replaces"]] if "replaces" in e else []),
    ]


def problems(case: Case) -> list[str]:
    """Why ``case`` cannot measure honestly: a checked text missing from the turns that
    state it, or present anywhere else (its other messages, or any text its growth may
    send)."""
    out = []
    elsewhere = normalized("\n".join(_growth_texts()))
    for item in case.items:
        for s in check_strings(item):
            n = normalized(s)
            where = {i for i, m in enumerate(case.messages) if n in normalized(text_of(m))}
            if not where & case.stating:
                out.append(f"{case.case_id}: {item.key}: {s!r} is never stated")
            if where - case.stating or n in elsewhere:
                out.append(f"{case.case_id}: {item.key}: {s!r} appears outside its turns")
    return out


@cache
def _growth_texts() -> tuple[str, ...]:
    pairs = [text_of(m) for pair in filler() for m in pair]
    return (*pairs, *CONTINUATIONS, *ANSWERS, SYSTEM)


@cache
def _counter() -> ChatCounter:
    encoding = get_encoding("o200k_base")
    return ChatCounter(lambda text: len(encoding.encode_ordinary(text)))


def count(messages: list[Message]) -> int:
    """o200k tokens of ``messages``, as the engine counts them (strategies.tokens)."""
    counter = _counter()
    return sum(counter.message(m) for m in messages)


def from_template(template: TemplateDefinition, seed: int, level: DifficultyLevel) -> Case:
    generated: GeneratedCase = generate_case(template, seed, level)
    bindings = resolve_variables(list(template.variables), seed)
    rng = random.Random(seed)
    pool = rng.sample(filler(), len(filler()))
    messages: list[Message] = [{"role": "system", "content": SYSTEM}]
    stating: set[int] = set()
    turns = generated.transcript.turns
    for k, turn in enumerate(turns):
        if "distractor" not in turn.tags:
            stating.add(len(messages))
        messages.append({"role": turn.role.value, "content": turn.content})
        block_ends = "distractor" in turn.tags and (
            k + 1 == len(turns) or "distractor" not in turns[k + 1].tags
        )
        if block_ends and k + 1 < len(turns):
            for _ in range(BURY[level]):
                messages.extend(pool.pop())
    while count(messages) < SIZE[level] and pool:
        messages.extend(pool.pop())
    items = [_bound(item, bindings) for item in generated.evaluation_items]
    return Case(
        case_id=generated.case_id,
        family=template.family,
        messages=messages,
        stating=frozenset(stating),
        items=items,
        seed=seed,
    )


def _bound(item: EvaluationItem, bindings: dict[str, str]) -> EvaluationItem:
    """CompactBench substitutes variables in an item's string values, not in ``values``
    lists: those too."""
    values = item.expected.get("values")
    if values is None:
        return item
    expected = {**item.expected, "values": [substitute(v, bindings) for v in values]}
    return item.model_copy(update={"expected": expected})


def _distinct(template: TemplateDefinition, seed: int) -> bool:
    values = list(resolve_variables(list(template.variables), seed).values())
    return len({normalized(v) for v in values}) == len(values)


def needle_case(seed: int, level: DifficultyLevel) -> Case:
    """Two multi-needle haystacks: a document a tool read, and notes the user pasted."""
    n = NEEDLES[level]
    doc = generate_hard_example(num_needles=n, ctx_chars=2000, seed=seed)
    notes = generate_hard_example(num_needles=n, ctx_chars=1200, seed=seed + 7919)
    call = {
        "id": f"call_{seed}",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "docs/planning/portfolio.md"}'},
    }
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "Can you read the portfolio planning doc and tell me where "
            "things stand? It's in docs/planning.",
        },
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": _haystack(doc)},
        {
            "role": "assistant",
            "content": "I've read it. It's mostly status notes, with the "
            "figures for each project spread through the text.",
        },
    ]
    stating = {3}
    rng = random.Random(seed)
    pool = rng.sample(filler(), len(filler()))
    for _ in range(1 + BURY[level]):
        messages.extend(pool.pop())
    stating.add(len(messages))
    messages.append(
        {
            "role": "user",
            "content": "Pasting the notes from the steering meeting "
            "too, sorry for the wall of text:\n\n" + _haystack(notes),
        }
    )
    messages.append({"role": "assistant", "content": "Thanks, I'll keep these next to the doc."})
    while count(messages) < SIZE[level] and pool:
        messages.extend(pool.pop())
    whole = normalized("\n".join(text_of(m) for m in messages))
    items: list[EvaluationItem] = []
    seen: set[str] = set()
    for source, example in (("doc", doc), ("notes", notes)):
        for k, record in enumerate(example["needle_records"]):
            value = record["value"]
            if whole.count(normalized(value)) != 1:  # shared or confusable: the whole sentence
                value = record["sentence"]
            if value in seen:
                continue
            seen.add(value)
            items.append(
                EvaluationItem(
                    key=f"{source}_{k}",
                    item_type=EvaluationItemType.IMMUTABLE_FACT_RECALL,
                    prompt=f"What is the {record['type'].replace('_', ' ')} of {record['entity']}?",
                    expected={"check": "contains_normalized", "value": value},
                )
            )
    return Case(
        case_id=f"multi-needle:s{seed}:d{level.value}",
        family="multi_needle",
        messages=messages,
        stating=frozenset(stating),
        items=items,
        seed=seed,
    )


def _haystack(example: dict[str, Any]) -> str:
    prompt = str(example["prompt"])
    return prompt.split("Document:\n", 1)[1].rsplit("\n\nQuestion:", 1)[0]


def cases(seeds: int, levels: tuple[DifficultyLevel, ...], per_family: int | None) -> list[Case]:
    """``seeds`` cases per template and level (the first seeds from 1 whose values are
    distinct and whose checks are honest), ``per_family`` templates a family at most; and as
    many needle cases."""
    out: list[Case] = []
    taken: dict[str, int] = {}
    for template in templates():
        if per_family is not None and taken.get(template.family, 0) >= per_family:
            continue
        taken[template.family] = taken.get(template.family, 0) + 1
        for level in levels:
            found = 0
            for seed in range(1, 200):
                if found == seeds:
                    break
                if not _distinct(template, seed):
                    continue
                case = from_template(template, seed, level)
                if problems(case):
                    continue
                out.append(case)
                found += 1
            if found < seeds:
                raise ValueError(f"{template.key}: only {found} honest seeds at {level.value}")
    for level in levels:
        wanted = seeds * (per_family or 3)
        honest = (c for c in map(needle_case, range(1, 200), repeat(level)) if not problems(c))
        out += islice(honest, wanted)
    return out
