"""Each client's page under docs/ (#53: one page per client, tested as written) opens with its
set-up, which must be the README's "Use it with…" snippet for that client word for word: the
README's snippets are the ones ``test_use_it_with.py`` runs with the real clients, so a page's
set-up is run as written too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.clients.test_use_it_with import snippets

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = {
    "Claude Code": "claude-code.md",
    "Codex CLI": "codex.md",
    "openai-agents": "openai-agents.md",
}
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("label", PAGES)
def test_a_clients_page_sets_it_up_as_the_readme_does(label: str) -> None:
    page = (DOCS / PAGES[label]).read_text()
    setup = page.split("## Set up\n", 1)[1].split("\n## ", 1)[0]
    (found,) = FENCE.findall(setup)
    assert found == snippets()[label]
    assert "## What the proxy does for it" in page
