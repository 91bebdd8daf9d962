"""The documentation's examples hold, in the README and every page under docs/ (read in the
order the README's Reference lists them): every fenced YAML block passes ``check-config`` on its
own, as a reader copies it (a teams block once failed alone, naming policies of the block before
it), every ``contextwarden`` command in a shell block parses with the real CLI, every Python
block runs against the quick start's proxy (the embedded default config, no file) in front of
the demo upstream, and the README's demo output is what ``contextwarden demo`` prints. The
README's own policy example once failed check-config."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.cli import build_parser
from proxy.config.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\((docs/[\w-]+\.md)(?:#[\w-]+)?\)")


def pages() -> list[Path]:
    """The README, then the pages its Reference section names, in that order."""
    reference = README.read_text().split("## Reference", 1)[1].split("\n## ", 1)[0]
    named = dict.fromkeys(LINK.findall(reference))
    return [README, *(ROOT / name for name in named)]


def blocks(language: str) -> list[str]:
    return [
        body
        for page in pages()
        for lang, body in FENCE.findall(page.read_text())
        if lang == language
    ]


def test_every_page_is_linked_from_the_readme_and_every_link_lands() -> None:
    linked = {p.name for p in pages()[1:]}
    assert linked == {p.name for p in (ROOT / "docs").glob("*.md")}
    anchors = {
        page.name: {
            re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)
        }
        for page in pages()
    }
    for page in pages():
        for target, anchor in re.findall(r"\]\(([\w./-]*?)(?:#([\w-]+))?\)", page.read_text()):
            if target.startswith(("http", "mailto")):
                continue
            name = Path(target).name if target else page.name
            if name.endswith(".md"):
                assert name in anchors, f"{page.name}: a link to {target} that does not exist"
                assert not anchor or anchor in anchors[name], f"{page.name}: #{anchor} in {name}"


def test_the_readme_has_examples() -> None:
    assert len(blocks("yaml")) >= 6
    assert len(blocks("sh")) >= 4
    assert len(blocks("python")) >= 3


def test_every_python_example_runs_against_the_quick_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block as written, with the README's address swapped for a live proxy's and the
    names it leaves to the reader (``items``, ``tools``, ``messages``) given small values. The
    proxy is the quick start's: the embedded default config, its two upstreams pointed at the
    demo upstream by the variables the quick start reads."""
    from agents import set_tracing_disabled
    from agents.models import _openai_shared
    from agents.tracing import trace
    from agents.tracing.traces import NoOpTrace

    from proxy.app import create_app
    from proxy.demo.servers import BackgroundServer
    from proxy.demo.upstream import create_upstream
    from tests.conftest import assert_no_plan_fallbacks

    with BackgroundServer(create_upstream(window=8000)) as upstream:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{upstream.url}/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", upstream.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path))
        app = create_app(load_settings())
        # The application's shell: its own keys, the proxy's address in the code.
        monkeypatch.delenv("OPENAI_BASE_URL")
        monkeypatch.delenv("ANTHROPIC_BASE_URL")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
        set_tracing_disabled(False)  # the SDK's default: the README's snippet turns it off
        default_client = _openai_shared.get_default_openai_client()
        try:
            with BackgroundServer(app) as proxy:
                for block in blocks("python"):
                    names: dict[str, Any] = {
                        "items": [{"role": "user", "content": "hello"}],
                        "tools": [],
                        "messages": [{"role": "user", "content": "hello"}],
                    }
                    exec(block.replace("http://127.0.0.1:8080", proxy.url), names)
                    assert "client" in names or "agents" in names
            assert isinstance(trace("run"), NoOpTrace), "openai-agents would trace to OpenAI"
        finally:
            set_tracing_disabled(True)
            _openai_shared.set_default_openai_client(default_client)  # type: ignore[arg-type]
        assert_no_plan_fallbacks(app)


def test_every_yaml_example_passes_check_config_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each block on its own, as a reader copies it into a file: ``check-config`` exits 0."""
    from proxy.cli import main

    compose = (ROOT / "deploy" / "docker-compose.yaml").read_text()
    examples = blocks("yaml")
    for k, text in enumerate(examples):
        if text == compose:  # not a configuration: the recipe's (tests/e2e/test_recipe.py)
            continue
        fragment = yaml.safe_load(text)
        assert isinstance(fragment, dict), f"YAML example {k} is not a mapping"
        path = tmp_path / f"example-{k}.yaml"
        path.write_text(text)
        code = main(["check-config", str(path)])
        assert code == 0, f"YAML example {k}:\n{text}\n{capsys.readouterr().err}"


DEMO = re.compile(r"^```text\n\$ contextwarden (demo[^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
VOLATILE = [
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"ck_[0-9a-f]{20}"), "ck_ID"),
]


def same_run(shown: list[str], printed: list[str]) -> bool:
    """Whether ``shown`` is ``printed`` with runs of lines left out where it says ``...``."""
    if not shown:
        return not printed
    if shown[0].strip() == "...":
        return any(same_run(shown[1:], printed[i:]) for i in range(len(printed) + 1))
    return bool(printed) and shown[0] == printed[0] and same_run(shown[1:], printed[1:])


def normalized(text: str) -> list[str]:
    for pattern, stands_for in VOLATILE:
        text = pattern.sub(stands_for, text)
    return [line.rstrip() for line in text.rstrip().splitlines()]


def test_the_readme_demo_output_is_what_the_demo_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run as the README shows it, the demo prints the README's lines (the port and the
    checkpoint's id change from run to run)."""
    from proxy.cli import main

    shown = DEMO.findall(README.read_text())
    assert shown, "the README shows no demo output"
    for argv, text in shown:
        args = build_parser().parse_args(shlex.split(argv))
        assert main(shlex.split(argv)) == 0
        printed = capsys.readouterr().out
        assert same_run(normalized(text), normalized(printed)), printed
        # Every turn, shown or not, forwarded within its budget, and the budget within the
        # window (the demo model is counted exactly): columns turn, sent, fwd, tokens, budget.
        turns = [line.split() for line in printed.splitlines() if line[:4].strip().isdigit()]
        assert len(turns) == args.turns
        for turn in turns:
            forwarded = int(turn[3].split("->")[1].lstrip("≤"))
            assert forwarded <= int(turn[4]) <= args.window, turn


def commands() -> list[list[str]]:
    out = []
    for text in blocks("sh"):
        for line in text.replace("\\\n", " ").splitlines():  # continued lines joined
            for part in re.split(r"&&|\|", line):
                words = shlex.split(part, comments=True)
                # The program, not an image or tag of that name: the last ``contextwarden``
                # followed by a command word (``docker run ... contextwarden contextwarden serve``).
                names = [
                    i
                    for i, w in enumerate(words[:-1])
                    if w.endswith("contextwarden") and words[i + 1][:1].isalpha()
                ]
                if names:
                    out.append(words[names[-1] + 1 :])
    return out


@pytest.mark.parametrize("argv", commands(), ids=" ".join)
def test_every_cli_example_parses(argv: list[str]) -> None:
    build_parser().parse_args(argv)  # SystemExit (2) on an unknown command or option
