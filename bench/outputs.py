"""Tokens saved by re-encoding tool outputs, per kind, on outputs the project makes itself:
its own test runs, file reads, grep, git log, and JSON from package metadata (``pip inspect``,
``npm ls --json``, the clients' lock file).

Each output is counted (o200k) as it came, after lossless re-encoding (strategies/lossless.py:
JSON minified, runs of identical lines counted) and after content-aware compaction of that
(strategies/content_compact.py, opt-in). Every JSON output's lossless form is parsed back and
compared with the original's value.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from proxy.windows.tokenizers import get_encoding
from strategies.content_compact import ContentCompact
from strategies.encodings import encoding_for_model
from strategies.lossless import Lossless

ROOT = Path(__file__).resolve().parents[1]
FILES = (
    "strategies/engine.py",
    "strategies/rules.py",
    "proxy/request/planning/plan.py",
    "proxy/formats/anthropic.py",
    "proxy/formats/responses.py",
    "proxy/config/settings.py",
)


@dataclass(frozen=True)
class Output:
    kind: str
    name: str
    text: str
    call: tuple[str, str] = ("bash", "{}")  # the tool and arguments it came from


def run(argv: list[str], cwd: Path = ROOT, stderr: bool = True) -> str:
    """What a command prints, as an agent's shell tool returns it (``stderr``: its errors
    after its output; JSON commands are read for their output alone)."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    return done.stdout + (done.stderr if stderr else "")


def corpus(quick: bool) -> list[Output]:
    py = sys.executable
    tests = ["tests/strategies/test_error_output.py"]
    if not quick:
        tests += ["tests/strategies/test_lossless.py", "tests/strategies/test_standing.py"]
    pytest = [py, "-m", "pytest", "-p", "no:cacheprovider"]
    out = [
        Output("test run", "pytest -vv", run([*pytest, "-vv", *tests])),
        Output("test run", "pytest", run([*pytest, *tests])),
        Output("test run", "pytest --collect-only", run([*pytest, "--collect-only", *tests])),
    ]
    for path in FILES[:2] if quick else FILES:
        text = run(["cat", "-n", path])
        out.append(Output("file read", path, text, ("read_file", json.dumps({"path": path}))))
    out.append(Output("grep", "grep -rn 'def '", run(["grep", "-rn", "def ", "strategies"])))
    out.append(Output("grep", "grep -rn import", run(["grep", "-rn", "^from ", "proxy/request"])))
    out.append(Output("git log", "git log --stat", run(["git", "log", "--stat", "-n", "30"])))
    out.append(
        Output("git log", "git log --oneline", run(["git", "log", "--oneline", "-n", "300"]))
    )
    pip = [py, "-m", "pip", "--disable-pip-version-check"]
    listed = run([*pip, "list", "--format=json"], stderr=False)
    out.append(Output("JSON", "pip list --format=json", listed))
    if not quick:
        out.append(Output("JSON", "pip inspect", run([*pip, "inspect"], stderr=False)))
    clients = ROOT / "tests" / "clients"
    npm = run(["npm", "ls", "--json", "--all"], clients, stderr=False)
    out.append(Output("JSON", "npm ls --json", npm))
    lock = (clients / "package-lock.json").read_text()
    out.append(
        Output("JSON", "package-lock.json", lock, ("read_file", '{"path": "package-lock.json"}'))
    )
    return [o for o in out if o.text.strip()]


def same_json(before: str, after: str) -> bool | None:
    """Whether a JSON output parses back to the same value (None: it is not JSON)."""
    try:
        value = json.loads(before)
    except ValueError:
        return None
    return bool(json.loads(after) == value)


def output_rows(quick: bool) -> tuple[list[str], list[list[str]]]:
    enc = get_encoding(encoding_for_model("gpt-4.1") or "o200k_base")
    n = lambda t: len(enc.encode_ordinary(t))  # noqa: E731
    lossless, compact = Lossless(min_chars=0), ContentCompact(min_chars=0)
    kinds: dict[str, list[int]] = {}
    rows, wrong = [], 0
    for o in corpus(quick):
        re_encoded = lossless._text(o.text)
        if same_json(o.text, re_encoded) is False:
            wrong += 1
        short = compact.compact(re_encoded, o.call)
        digest = short if short is not None and len(short) < len(re_encoded) else re_encoded
        figures = [1, n(o.text), n(re_encoded), n(digest)]
        if o.kind == "JSON":
            rows.append(_row(f"JSON: {o.name}", *figures))
        kinds[o.kind] = [a + b for a, b in zip(kinds.get(o.kind, [0] * 4), figures, strict=True)]
    rows += [_row(kind, *figures) for kind, figures in kinds.items()]
    rows.append(["JSON outputs parsed back to a different value", str(wrong), "", "", ""])
    header = ["kind", "outputs", "tokens as they came", "lossless", "content-aware (opt-in)"]
    return header, rows


def _row(kind: str, count: int, before: int, after: int, digested: int) -> list[str]:
    return [
        kind,
        str(count),
        str(before),
        f"{after} ({1 - after / before:.0%} saved)",
        f"{digested} ({1 - digested / before:.0%} saved)",
    ]
