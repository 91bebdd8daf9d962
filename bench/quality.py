"""Trimming quality on the same inputs: ours against litellm.utils.trim_messages."""

from __future__ import annotations

import random
from typing import Any

from bench.conversations import agent_conversation
from proxy.config.environment import prepare_environment
from proxy.windows.tokenizers import text_tokens
from strategies.engine import FitRequest, Policy, fit
from strategies.errors import DoesNotFit
from strategies.tokens import ChatCounter, count_prompt


def orphans(messages: list[dict[str, Any]]) -> int:
    """Tool results without their call plus calls without all their results."""
    bad, open_ids = 0, set()
    for m in messages:
        if m.get("role") == "tool":
            if m.get("tool_call_id") in open_ids:
                open_ids.discard(m.get("tool_call_id"))
            else:
                bad += 1
            continue
        bad += len(open_ids)
        open_ids = {c["id"] for c in m.get("tool_calls") or []}
    return bad + len(open_ids)


def quality_rows(cases: int) -> tuple[list[str], list[list[str]]]:
    prepare_environment()
    from litellm.utils import trim_messages

    counter = ChatCounter(text_tokens("o200k_base"))
    rng = random.Random(11)
    names = ("contextwarden (default)", "contextwarden (cache_cut_share 0)", "litellm")
    totals = {name: {"use": 0.0, "over": 0, "orphans": 0, "lost": 0, "n": 0} for name in names}
    for case in range(cases):
        convo = agent_conversation(rng.choice([4000, 12000, 30000]), counter, seed=case)
        budget = int(count_prompt(counter, convo) * rng.uniform(0.2, 0.8))
        last_user = max(i for i, m in enumerate(convo) if m["role"] == "user")
        outputs: dict[str, list[dict[str, Any]]] = {}
        for name, policy in ((names[0], Policy()), (names[1], Policy(cache_cut_share=0))):
            try:
                outputs[name] = fit(
                    FitRequest(messages=convo, budget=budget, counter=counter, policy=policy)
                ).messages
            except DoesNotFit:
                outputs[name] = []
        outputs["litellm"] = trim_messages(
            [dict(m) for m in convo], model="gpt-4o", max_tokens=budget
        )
        for name, out in outputs.items():
            t = totals[name]
            used = count_prompt(counter, out) if out else 0
            t["use"] += used / budget
            t["over"] += used > budget
            t["orphans"] += orphans(out) > 0
            t["lost"] += not any(
                m.get("content") == convo[last_user]["content"] and m.get("role") == "user"
                for m in out
            )
            t["n"] += 1
    header = [
        "trimmer",
        "budget use (mean)",
        "over budget",
        "orphaned tool messages",
        "last user message lost",
    ]
    rows = [
        [
            name,
            f"{t['use'] / t['n']:.0%}",
            f"{t['over']}/{t['n']}",
            f"{t['orphans']}/{t['n']}",
            f"{t['lost']}/{t['n']}",
        ]
        for name, t in totals.items()
    ]
    return header, rows
