"""OpenAI Responses ``context_management`` compaction served for an upstream without it (#53
item 2), through the real ``openai`` SDK: past the threshold, the answer carries a compaction
item first in its output, whole and streamed (events renumbered as OpenAI's API numbers them);
the upstream never sees the field; the next request, carrying the item in place of the history
it stands for, is answered, the item expanded into the summary. Under the threshold, or when
no summary can be made, the answer is the upstream's as it came."""

from __future__ import annotations

from typing import Any

from proxy.formats.compaction import MARK
from tests.e2e.conftest import MODEL, StackFactory

ASK = [{"type": "compaction", "compact_threshold": 1000}]
FACTS = "The deploy target is eu-west-3 and the release train is Tuesday."


def history(turns: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": FACTS}]
    for i in range(turns):
        items.append({"role": "assistant", "content": f"Noted step {i}. " + "detail " * 40})
        items.append({"role": "user", "content": f"Step {i + 1}: " + "more context " * 30})
    return items


def dumped(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = response.model_dump(exclude_none=True)
    return data


def test_past_the_threshold_the_answer_carries_a_compaction_item(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(window=32_000)
    items = history(12)  # about 2,000 tokens, past 1,000
    answer = stack.client.responses.create(
        model=MODEL, input=items, extra_body={"context_management": ASK}
    )
    output = dumped(answer)["output"]
    assert output[0]["type"] == "compaction"
    assert output[0]["encrypted_content"].startswith(MARK)
    assert "message" in [o["type"] for o in output[1:]]  # the model's reply after it
    sent = stack.received[-1]
    assert "context_management" not in sent and "context_management" not in str(sent)
    # The next turn carries the item in place of what it stands for.
    follow = [output[0], *output[1:], {"role": "user", "content": "Where do we deploy?"}]
    again = stack.client.responses.create(model=MODEL, input=follow)
    assert again.status == "completed"
    forwarded = str(stack.received[-1])
    assert "eu-west-3" in forwarded, forwarded[:600]
    assert MARK not in forwarded  # expanded, never sent as an opaque item


def test_streamed_the_item_comes_first_and_the_events_are_renumbered(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(window=32_000)
    events = list(
        stack.client.responses.create(
            model=MODEL, input=history(12), stream=True, extra_body={"context_management": ASK}
        )
    )
    kinds = [e.type for e in events]
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # none skipped
    added = [e for e in events if e.type == "response.output_item.added"]
    assert added[0].output_index == 0 and added[0].item.type == "compaction"
    assert all(e.output_index >= 1 for e in added[1:])
    assert kinds.index("response.output_item.added") == kinds.index("response.in_progress") + 1
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output[0].type == "compaction"


def test_under_the_threshold_or_without_a_summary_no_item(make_stack: StackFactory) -> None:
    stack = make_stack(window=32_000)
    small = stack.client.responses.create(
        model=MODEL, input=history(1), extra_body={"context_management": ASK}
    )
    assert all(o["type"] != "compaction" for o in dumped(small)["output"])
    stack.upstream_app.state.fail_summaries = True
    failed = stack.client.responses.create(
        model=MODEL, input=history(12), extra_body={"context_management": ASK}
    )
    assert failed.status == "completed"
    assert all(o["type"] != "compaction" for o in dumped(failed)["output"])


def test_at_a_small_window_the_item_still_holds_the_ledger(make_stack: StackFactory) -> None:
    """A user's try: at a 4,096-token window the full reply reserve left the compaction no
    room, and the ledger (the task, the rules) was dropped from the item; the summarizer's
    own summary kept neither."""
    stack = make_stack(window=4096)
    items = history(6)
    items[0] = {"role": "user", "content": f"Never use floating point for money. {FACTS}"}
    answer = stack.client.responses.create(
        model=MODEL,
        input=items,
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 300}]},
    )
    item = dumped(answer)["output"][0]
    assert item["type"] == "compaction"
    follow = [item, {"role": "user", "content": "What is the rule about money?"}]
    stack.client.responses.create(model=MODEL, input=follow)
    forwarded = str(stack.received[-1])
    assert "floating point" in forwarded and "eu-west-3" in forwarded
