"""File tracking through shell commands (Codex's shell calls, Claude Code's Bash)."""

from __future__ import annotations

import orjson
import pytest

from strategies.checkpoints.cut import track_files
from strategies.shell_files import shell_files


@pytest.mark.parametrize(
    ("command", "read", "modified"),
    [
        ("cat README.md", {"README.md"}, set()),
        ("head -n 20 src/app.py | grep -n def", {"src/app.py"}, set()),
        (
            "grep -rn TODO proxy/app.py proxy/request/plan.py",
            {"proxy/app.py", "proxy/request/plan.py"},
            set(),
        ),
        ("sed -n 1,40p a.py", {"a.py"}, set()),
        ("sed -i s/a/b/ a.py", set(), {"a.py"}),
        ("echo hi > out.txt && cat in.txt", {"in.txt"}, {"out.txt"}),
        ("python -m pytest tests", set(), set()),
        ("cat 'unbalanced", set(), set()),
        (["bash", "-lc", "cat notes.md | tee copy.md"], {"notes.md"}, {"copy.md"}),
    ],
)
def test_shell_files(command: object, read: set[str], modified: set[str]) -> None:
    assert shell_files(command) == (read, modified)  # type: ignore[arg-type]


def test_track_files_reads_shell_calls_of_both_agent_formats() -> None:
    def call(name: str, args: object) -> dict[str, object]:
        fn = {"name": name, "arguments": orjson.dumps(args).decode()}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": fn}],
        }

    messages = [
        call("local_shell_call", {"type": "exec", "command": ["bash", "-lc", "cat setup.py"]}),
        call("shell_call", {"commands": ["sed -i s/x/y/ cfg.ini", "wc -l data.csv"]}),
        call("Bash", {"command": "tail -5 log.txt"}),
        call("apply_patch_call", {"type": "update_file", "path": "main.py"}),
    ]
    files = track_files(messages)
    assert files.read == ("data.csv", "log.txt", "setup.py")
    assert files.modified == ("cfg.ini", "main.py")
