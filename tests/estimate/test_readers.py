"""The transcript readers on the shapes a short recorded run does not show: a rewound branch,
a subagent's entries, Claude Code's own compaction, Codex's compaction, a torn last line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from proxy.estimate import claude_code, codex

WHEN = "2026-12-06T06:00:00.000Z"


def entry(uid: str, parent: str | None, role: str, content: Any, **more: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        message |= {"id": more.pop("mid", f"msg_{uid}"), "model": "claude-test"}
    return {
        "type": role,
        "uuid": uid,
        "parentUuid": parent,
        "sessionId": "s",
        "timestamp": WHEN,
        "isSidechain": more.pop("side", False),
        "message": message,
        **more,
    }


def write(path: Path, lines: list[dict[str, Any]], torn: bool = False) -> Path:
    data = b"\n".join(orjson.dumps(line) for line in lines) + b"\n"
    path.write_bytes(data + (b'{"type": "assistant", "uu' if torn else b""))
    return path


def call(uid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"t{uid}", "name": "Bash", "input": {"command": uid}}


def result(uid: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": f"t{uid}", "content": f"out {uid}"}]


def test_claude_code_follows_the_newest_branch_and_merges_one_answers_blocks(
    tmp_path: Path,
) -> None:
    lines = [
        entry("u1", None, "user", "task"),
        entry("a1", "u1", "assistant", [{"type": "thinking", "thinking": "t"}], mid="m1"),
        entry("a2", "a1", "assistant", [call("1")], mid="m1"),
        entry("r1", "a2", "user", result("1")),
        entry("x1", "r1", "assistant", [{"type": "text", "text": "a subagent"}], side=True),
        entry("old", "r1", "assistant", [{"type": "text", "text": "rewound"}]),
        entry(
            "e1", "r1", "assistant", [{"type": "text", "text": "API Error"}], isApiErrorMessage=True
        ),
        entry("a3", "e1", "assistant", [{"type": "text", "text": "done"}]),
        entry("s1", "a3", "assistant", [{"type": "text", "text": "No response requested."}]),
    ]
    lines[-1]["message"]["model"] = "<synthetic>"
    session = claude_code.read(write(tmp_path / "s.jsonl", lines, torn=True))
    assert session.model == "claude-test"
    # The request the API error answered, and its retry that was answered: the same history.
    assert len(session.requests) == 3
    assert session.requests[1] == session.requests[2]
    last = session.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert [b["type"] for b in last[1]["content"]] == ["thinking", "tool_use"]
    first = last[0]["content"]
    assert first[0]["text"].startswith("<system-reminder>") and "2026-12-06" in first[0]["text"]
    assert first[1] == {"type": "text", "text": "task"}


def test_claude_codes_own_compaction_starts_the_history_afresh(tmp_path: Path) -> None:
    summary = "This session is being continued. Summary: read steps 1 to 9."
    lines = [
        entry("u1", None, "user", "task"),
        entry("a1", "u1", "assistant", [call("1")]),
        entry("r1", "a1", "user", result("1")),
        entry("a2", "r1", "assistant", [{"type": "text", "text": "so far"}]),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b",
            "parentUuid": None,
            "logicalParentUuid": "a2",
            "sessionId": "s",
        },
        entry("u2", "b", "user", summary, isCompactSummary=True),
        entry("a3", "u2", "assistant", [{"type": "text", "text": "done"}]),
    ]
    session = claude_code.read(write(tmp_path / "s.jsonl", lines))
    assert len(session.requests) == 3
    (first,) = session.requests[-1]["messages"]  # the summary, after the date's context
    assert first["content"][0]["text"].startswith("<system-reminder>")
    assert first["content"][1:] == [{"type": "text", "text": summary}]


def test_a_subagents_own_file_is_its_conversation(tmp_path: Path) -> None:
    lines = [
        entry("u1", None, "user", "look", side=True),
        entry("a1", "u1", "assistant", [{"type": "text", "text": "found"}], side=True),
    ]
    session = claude_code.read(write(tmp_path / "agent-1.jsonl", lines))
    assert session.requests == [{"messages": [session.requests[0]["messages"][0]]}]


def item(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": "response_item", "payload": {"type": kind, **more}}


def test_codex_rollouts_each_answer_run_is_one_request_and_a_compaction_replaces_history(
    tmp_path: Path,
) -> None:
    meta = {"type": "session_meta", "payload": {"id": "s", "base_instructions": {"text": "be"}}}
    user = {"role": "user", "content": [{"type": "input_text", "text": "task"}]}
    lines = [
        meta,
        {"type": "turn_context", "payload": {"model": "gpt-test"}},
        item("message", **user, internal_chat_message_metadata_passthrough={"x": 1}),
        item("reasoning", id="r1", summary=[]),
        item("function_call", call_id="c1", name="shell", arguments="{}"),
        {"type": "event_msg", "payload": {"type": "token_count"}},
        item("function_call_output", call_id="c1", output="out"),
        item("ghost_snapshot", ghost_commit={}),
        item("message", role="assistant", content=[{"type": "output_text", "text": "ok"}]),
        {"type": "compacted", "payload": {"message": "", "replacement_history": [user]}},
        item("message", role="user", content=[{"type": "input_text", "text": "more"}]),
        item("message", role="assistant", content=[{"type": "output_text", "text": "ok"}]),
    ]
    session = codex.read(write(tmp_path / "rollout-1.jsonl", lines))
    assert session.model == "gpt-test"
    inputs = [r["input"] for r in session.requests]
    assert [len(i) for i in inputs] == [1, 4, 2]
    assert inputs[0] == [{"type": "message", **user}]  # its own fields left out
    assert all(r["instructions"] == "be" for r in session.requests)  # no developer message
    assert session.notes == ["tools: not in the rollout"]
