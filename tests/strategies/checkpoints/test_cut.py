from __future__ import annotations

from typing import Any

from strategies.checkpoints.cut import (
    NO_HISTORY,
    SPLIT_SEPARATOR,
    FileLists,
    chunks,
    find_cut,
    keep_recent_tokens,
    merge_split,
    recent_pieces,
    serialize,
    summary_request,
    track_files,
    turn_prefix_request,
    with_file_lists,
    with_opening,
)
from tests.counters import FixedCounter

C = FixedCounter(10)


def call(i: str, name: str = "read", args: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
        ],
    }


def test_keep_recent_default_follows_agentcore_within_a_quarter_of_the_budget() -> None:
    assert keep_recent_tokens(200_000) == 20000
    assert keep_recent_tokens(40_000) == 10000
    assert keep_recent_tokens(10_000) == 2500
    assert keep_recent_tokens(8_000) == 2000
    assert keep_recent_tokens(6_000) == 1500
    assert keep_recent_tokens(1_000) == 250
    assert keep_recent_tokens(1_000, 123) == 123


def test_cut_keeps_recent_tokens_and_lands_on_a_user_message() -> None:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": str(i)} for i in range(10)]
    cut = find_cut(msgs, 0, 30, C)
    assert cut is not None
    assert cut.index == 7 and cut.turn_start == 6  # an assistant: the turn is split
    assert find_cut(msgs, 0, 40, C) == find_cut(msgs, 0, 35, C)
    assert find_cut(msgs, 0, 200, C) is None


def test_cut_never_falls_on_a_tool_result_or_inside_a_tool_loop() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        call("1"),
        {"role": "tool", "tool_call_id": "1", "content": "x"},
        call("2"),
        {"role": "tool", "tool_call_id": "2", "content": "y"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    for keep in range(10, 70, 10):
        cut = find_cut(msgs, 0, keep, C)
        if cut is not None:
            assert msgs[cut.index]["role"] in ("user", "assistant")
            assert not msgs[cut.index].get("tool_calls")


def test_serialize_labels_and_cuts_tool_results() -> None:
    msgs = [
        {"role": "user", "content": "hello"},
        call("1", "read", '{"path": "src/app.py"}'),
        {"role": "tool", "tool_call_id": "1", "content": "z" * 2500},
        {"role": "assistant", "content": "ok"},
    ]
    text = serialize(msgs)
    assert "[User]: hello" in text
    assert "[Assistant tool calls]: read(path='src/app.py')" in text
    assert "[Tool result]: " + "z" * 2000 + "\n\n[... 500 more characters truncated]" in text
    assert text.endswith("[Assistant]: ok")
    assert "[... 7 more characters truncated]" in serialize(
        [{"role": "user", "content": "q" * 10}], max_chars=3
    )


def test_prompts_initial_update_and_turn_prefix() -> None:
    msgs = [{"role": "user", "content": "plan a trip"}]
    first = summary_request(msgs, None)
    assert first[1]["content"].startswith("<conversation>\n[User]: plan a trip\n</conversation>")
    assert "## Goal" in first[1]["content"] and "<previous-summary>" not in first[1]["content"]
    update = summary_request(msgs, "## Goal\nTrip")
    assert "<previous-summary>\n## Goal\nTrip\n</previous-summary>" in update[1]["content"]
    assert "In Progress to Done" in update[1]["content"]
    assert "## Original Request" in turn_prefix_request(msgs)[1]["content"]


def test_split_turn_merge() -> None:
    assert merge_split("S", "P") == "S" + SPLIT_SEPARATOR + "P"
    assert merge_split(None, "P") == NO_HISTORY + SPLIT_SEPARATOR + "P"


def test_file_tracking_carries_and_separates_read_from_modified() -> None:
    msgs = [
        call("1", "read", '{"path": "a.py"}'),
        call("2", "edit", '{"file_path": "b.py"}'),
        call("3", "read", '{"path": "b.py"}'),
        call("4", "bash", '{"cmd": "ls"}'),
        call("5", "read", "not json"),
    ]
    files = track_files(msgs, previous=FileLists(read=("z.md",), modified=("c.py",)))
    assert files == FileLists(read=("a.py", "z.md"), modified=("b.py", "c.py"))
    text = with_file_lists("S", files)
    assert (
        text
        == "S\n\n<read-files>\na.py\nz.md\n</read-files>\n\n<modified-files>\nb.py\nc.py\n</modified-files>"
    )


def test_chunks_respect_capacity() -> None:
    msgs = [{"role": "user", "content": str(i)} for i in range(7)]
    assert [len(c) for c in chunks(msgs, 30, C)] == [3, 3, 1]
    assert [len(c) for c in chunks(msgs, 5, C)] == [1] * 7


def test_the_opening_task_goes_into_the_summary_when_older_pieces_go_unsummarized() -> None:
    """Two calls afforded of three pieces: the oldest piece, with the task, would go unread;
    the task opens the first call instead, in room its oldest messages leave."""
    task = {"role": "user", "content": "TASK"}
    msgs = [task, *({"role": "assistant", "content": str(i)} for i in range(8))]
    pieces = chunks(msgs, 30, C)
    assert [len(p) for p in pieces] == [3, 3, 3]
    kept = recent_pieces(pieces, 2)
    calls = with_opening(kept, pieces[:1], 30, C)
    assert calls[0] == [task, *kept[0][1:]] and calls[1] is kept[1]
    assert sum(C.message(m) for m in calls[0]) <= 30
    assert with_opening(kept, [], 30, C) is kept  # nothing went: nothing to carry
    assert with_opening(kept, pieces[:1], 5, C) is kept  # a task larger than a call


def test_a_cut_moves_back_to_the_turn_start_when_the_turn_fits() -> None:
    from strategies.checkpoints.cut import find_cut
    from tests.counters import FixedCounter

    counter = FixedCounter(10)  # every message costs 10
    msgs = [{"role": "system", "content": "s"}]
    for i in range(6):
        msgs += [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"a{i}"}]
    # Keeping 5 tokens lands on an assistant message: a split turn (two summarizer calls)...
    split = find_cut(msgs, 1, 5, counter)
    assert split is not None and split.turn_start is not None
    # ...unless the whole turn fits in max_keep: then the cut is the turn's start, one call.
    whole = find_cut(msgs, 1, 5, counter, max_keep=40)
    assert whole is not None and whole.turn_start is None
    assert msgs[whole.index]["role"] == "user" and whole.index == split.turn_start
    assert find_cut(msgs, 1, 5, counter, max_keep=15) == split  # too big to keep: split
