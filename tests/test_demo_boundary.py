"""The demo stands where a user and a provider stand: ``proxy/demo/`` imports nothing of the
product but its public API (``proxy``'s own exports, proxy/__init__.py), and the third-party
packages it imports are runtime dependencies, so a plain ``pip install .`` runs
``contextwarden demo`` in every format."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import proxy
from proxy.demo.own import SUMMARIZER_MARK
from strategies.checkpoints.cut import SYSTEM_PROMPT

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "proxy" / "demo"
OURS = ("proxy", "strategies")
# Imported by a runtime dependency's own requirements (litellm ships tokenizers and the
# Anthropic tokenizer file the demo upstream counts with).
THROUGH = {"tokenizers": "litellm"}
DISTRIBUTIONS = {"yaml": "pyyaml"}


def imports() -> list[tuple[str, str, list[str]]]:
    """(file, module, names) for every import in proxy/demo/, at any depth."""
    out = []
    for path in sorted(DEMO.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                out.append((path.name, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                out += [(path.name, a.name, []) for a in node.names]
    return out


def test_the_demo_imports_only_the_public_api() -> None:
    internal = [
        f"{file}: {module}"
        for file, module, names in imports()
        if module.split(".")[0] in OURS
        and not module.startswith("proxy.demo")
        and not (module == "proxy" and set(names) <= set(proxy.__all__))
    ]
    assert not internal, "the demo imports the product's internals:\n" + "\n".join(internal)


def test_the_public_api_is_what_proxy_exports() -> None:
    from proxy.app import create_app
    from proxy.config.settings import load_settings

    assert (proxy.create_app, proxy.load_settings) == (create_app, load_settings)


def test_the_demo_needs_no_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    third_party = {
        module.split(".")[0]
        for _, module, _ in imports()
        if module.split(".")[0] not in (*OURS, "__future__")
        and module.split(".")[0] not in sys.stdlib_module_names
    }
    missing = [
        name
        for name in sorted(third_party)
        if DISTRIBUTIONS.get(name, name) not in runtime and THROUGH.get(name) not in runtime
    ]
    assert not missing, f"the demo imports packages that are not runtime dependencies: {missing}"
    assert {"openai", "anthropic"} <= runtime  # its clients


def test_the_summarizer_mark_is_the_proxys_prompt() -> None:
    # The demo upstream tells the proxy's summary requests apart by what the proxy sends.
    assert SYSTEM_PROMPT.startswith(SUMMARIZER_MARK)
