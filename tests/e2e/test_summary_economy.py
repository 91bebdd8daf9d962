"""When a summary is worth its cost: not for a conversation seen once, and a conversation that
has one keeps it."""

from __future__ import annotations

from tests.e2e.conftest import MODEL, StackFactory, unseen
from tests.e2e.test_checkpoints import over_budget_conversation


def ask(stack: object, turns: int) -> object:
    return stack.client.chat.completions.with_raw_response.create(  # type: ignore[attr-defined]
        model=MODEL, messages=over_budget_conversation(turns), max_tokens=64
    )


def test_a_conversation_seen_once_is_truncated_and_summarized_when_it_returns(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(summarize=True, policies={"default": {"summarizer": {
        "summarize_unseen": False}}})  # fmt: skip
    first = ask(stack, 16)
    assert "truncate_oldest" in first.headers["x-contextwarden-actions"]  # type: ignore[attr-defined]
    assert "x-contextwarden-checkpoint" not in first.headers  # type: ignore[attr-defined]
    assert stack.upstream_app.state.summaries == []
    # The same conversation comes back: its requests replay the first cut (sticky) while
    # that fits, and the first one that outgrows it is cut afresh, summarized this time.
    for turns in range(17, 40):
        again = ask(stack, turns)
        if "x-contextwarden-checkpoint" in again.headers:  # type: ignore[attr-defined]
            break
        assert "sticky" in again.headers["x-contextwarden-actions"]  # type: ignore[attr-defined]
    # Created on the spot, or prepared in the background while the replays ran: timing.
    checkpoint = again.headers["x-contextwarden-checkpoint"]  # type: ignore[attr-defined]
    assert checkpoint.startswith(("created", "reused"))
    assert turns > 17
    assert len(stack.upstream_app.state.summaries) >= 1


def test_one_offs_cost_no_summarizer_call(make_stack: StackFactory) -> None:
    stack = make_stack(summarize=True, policies={"default": {"summarizer": {
        "summarize_unseen": False}}})  # fmt: skip
    for turns in (14, 15, 16, 17, 18):
        msgs = over_budget_conversation(turns)
        msgs[1] = {"role": "user", "content": f"A different conversation {turns}."}
        stack.client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=64)  # type: ignore[arg-type]
    assert stack.upstream_app.state.summaries == []


def test_a_conversation_keeps_its_checkpoint_when_no_newer_one_can_be_made(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(summarize=True, policies=unseen())
    made = ask(stack, 16)
    checkpoint = made.headers["x-contextwarden-checkpoint"].split()[1]  # type: ignore[attr-defined]
    stack.upstream_app.state.fail_summaries = True  # no update can be made from here on
    for turns in range(17, 30):
        later = ask(stack, turns)
        assert later.headers["x-contextwarden-checkpoint"] == f"reused {checkpoint}"  # type: ignore[attr-defined]
    for payload in stack.received:
        assert stack.upstream_count(payload) + 64 <= stack.window
