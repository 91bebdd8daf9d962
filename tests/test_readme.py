"""The documentation's examples hold, in the README and every page under docs/ (read in the
order the README's Reference lists them): every fenced YAML block is a valid configuration (a
fragment over the blocks before it, as a reader assembles them), every ``contextwarden``
command in a shell block parses with the real CLI, and every Python block runs against a proxy
in front of the demo upstream. The README's own policy example once failed check-config."""

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


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def test_the_readme_has_examples() -> None:
    assert len(blocks("yaml")) >= 6
    assert len(blocks("sh")) >= 4
    assert len(blocks("python")) >= 3


def test_every_python_example_runs_against_a_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block as written, with the README's address swapped for a live proxy's and the
    names it leaves to the reader (``items``, ``tools``, ``messages``) given small values."""
    from proxy.demo.servers import BackgroundServer
    from proxy.demo.upstream import create_upstream
    from proxy.edge.app import create_app

    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
    with BackgroundServer(create_upstream(window=8000)) as upstream:
        base = f"{upstream.url}/v1"
        config = {
            "upstreams": {
                "demo": {"base_url": base, "apis": ["chat_completions", "responses", "messages"]}
            },
            "default_upstream": "demo",
            "models": {
                "gpt-5": {"context_window": 8000},
                "claude-sonnet-4-6": {"context_window": 8000},
            },
            "data_dir": str(tmp_path),
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            for block in blocks("python"):
                names: dict[str, Any] = {
                    "items": [{"role": "user", "content": "hello"}],
                    "tools": [],
                    "messages": [{"role": "user", "content": "hello"}],
                }
                exec(block.replace("http://127.0.0.1:8080", proxy.url), names)
                assert "client" in names


def test_every_yaml_example_is_a_valid_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block over the ones before it, so a teams block may name the policies above it."""
    monkeypatch.setenv("SEARCH_TEAM_KEY", "cw-search")
    monkeypatch.setenv("CHAT_TEAM_KEY", "cw-chat")
    assembled: dict[str, Any] = {"data_dir": str(tmp_path)}
    compose = (ROOT / "deploy" / "docker-compose.yaml").read_text()
    for k, text in enumerate(blocks("yaml")):
        if text == compose:  # not a configuration: the recipe's (tests/e2e/test_recipe.py)
            continue
        fragment = yaml.safe_load(text)
        assert isinstance(fragment, dict), f"YAML example {k} is not a mapping"
        assembled = merged(assembled, fragment)
        path = tmp_path / f"example-{k}.yaml"
        path.write_text(yaml.safe_dump(assembled))
        load_settings(path)  # raises ConfigError, naming the key, if the example is wrong


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
