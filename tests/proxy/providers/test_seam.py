"""The providers' seam (#57): what differs between the kinds of upstream is asked of
proxy/providers/, never decided by a test of a provider's or a local server's name elsewhere in
proxy/; and a kind is one module there plus its name in the config's list of kinds."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import get_args

from proxy.config.catalog import Upstream
from proxy.providers.base import TransportName
from proxy.providers.registry import PROVIDERS, SERVERS
from proxy.upstreams.transports import transports

ROOT = Path(__file__).resolve().parents[3]
PROXY = ROOT / "proxy"
# Every provider's and local server's name, as a config or a server spells it.
KINDS = frozenset(
    {"openai", "anthropic", "litellm", "ollama", "llama.cpp", "vllm", "sglang", "lmstudio"}
)
# Where an upstream's kind is read: its config's ``provider:`` and ``discovery:``, a provider's
# own ``kind``, ``server`` or ``probe``.
KIND_FIELDS = frozenset({"provider", "discovery", "kind", "server", "probe"})


def _names_kind(node: ast.AST) -> bool:
    """A string naming a kind, or a literal collection holding one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in KINDS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_kind(e) for e in node.elts)
    return False


def _reads_kind(node: ast.AST, aliases: set[str]) -> bool:
    """An upstream's kind: ``x.provider``, ``x["provider"]``, ``x.get("provider")``,
    ``getattr(x, "provider")``, or a name bound to one of these."""
    if isinstance(node, ast.Attribute):
        return node.attr in KIND_FIELDS
    if isinstance(node, ast.Subscript):
        key = node.slice
        return isinstance(key, ast.Constant) and key.value in KIND_FIELDS
    if isinstance(node, ast.Call) and node.args:
        called = ast.unparse(node.func)
        key = node.args[1] if called == "getattr" and len(node.args) > 1 else node.args[0]
        named = isinstance(key, ast.Constant) and key.value in KIND_FIELDS
        return named and (called == "getattr" or called.endswith(".get"))
    return isinstance(node, ast.Name) and node.id in aliases


def _patterns(pattern: ast.pattern) -> list[ast.AST]:
    return [n.value for n in ast.walk(pattern) if isinstance(n, ast.MatchValue)]


def kind_tests(source: str) -> list[str]:
    """Each comparison (``==``, ``!=``, ``in``, ``not in``, ``match``) of a kind's name against
    an upstream's kind in ``source``, as its line and text."""
    tree = ast.parse(source)
    aliases: set[str] = set()
    for node in ast.walk(tree):  # names bound to a kind (``kind = upstream.provider``)
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if _reads_kind(node.value, set()):
                aliases |= {t.id for t in targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(_names_kind, operands)) and any(_reads_kind(o, aliases) for o in operands):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match) and _reads_kind(node.subject, aliases):
            values = [v for case in node.cases for v in _patterns(case.pattern)]
            if any(map(_names_kind, values)):
                found.append(f"{node.lineno}: match {ast.unparse(node.subject)}")
    return found


def test_no_provider_name_is_tested_outside_the_providers() -> None:
    found = []
    for path in sorted(PROXY.rglob("*.py")):
        if (PROXY / "providers") in path.parents:
            continue
        found += [f"{path.relative_to(ROOT)}:{t}" for t in kind_tests(path.read_text())]
    assert not found, "ask proxy/providers/ instead:\n" + "\n".join(found)


def test_the_check_finds_each_way_of_testing_a_kind() -> None:
    """The tests of a provider's name the tree held before the providers (#57), and their
    near kin; and not a wire format's name (``fmt.name == "anthropic"``) nor a server's answer."""
    flagged = [
        'if upstream.provider == "litellm": pass',
        'if self.provider in ("openai", "anthropic") and not self.base_url: pass',
        'serving.sort(key=lambda name: settings.upstreams[name].provider != "anthropic")',
        'ok = upstream.discovery == "off" or upstream.provider != "openai"',
        'held = settings.upstreams[upstream].provider == "litellm"',
        'if "litellm" == u.provider: pass',
        'if data["provider"] not in ["ollama"]: pass',
        'if config.get("discovery") == "llama.cpp": pass',
        'if config.get("provider", "openai") != "openai": pass',
        'if getattr(u, "provider") == "Anthropic": pass',
        'kind = upstream.provider\nif kind == "vllm": pass',
        'match upstream.provider:\n    case "openai": pass\n    case _: pass',
        'match u.discovery:\n    case "lmstudio" | "ollama": pass',
    ]
    for source in flagged:
        assert kind_tests(source), source
    kept = [
        'if req.fmt.name == "anthropic": pass',
        'if fmt.api == "anthropic": pass',
        'if _shape(request) == "anthropic": pass',
        'server = "SGLang" if owner == "sglang" else "vLLM"',
        'if "openai" in names: pass',  # an upstream named openai, not a kind
        'if upstream.discovery == "off": pass',
        'match fmt.name:\n    case "anthropic": pass',
    ]
    for source in kept:
        assert not kind_tests(source), source


def _literal(field: str) -> set[str]:
    return set(get_args(Upstream.model_fields[field].annotation))


def test_the_kinds_are_the_configs_list() -> None:
    """Adding a kind is its module in proxy/providers/ and its name in the config's list."""
    assert set(PROVIDERS) == _literal("provider")
    assert set(SERVERS) == _literal("discovery") - {"auto", "off"}
    assert all(p.kind == kind for kind, p in PROVIDERS.items())
    assert all(p.server == name for name, p in SERVERS.items())
    # A local server refines a kind the config lists, one that window discovery asks, and
    # holds the probe that asks it; a kind holds none (``auto``: its local servers are asked).
    assert all(s.kind in PROVIDERS and PROVIDERS[s.kind].discovers for s in SERVERS.values())
    assert all(s.probe is not None for s in SERVERS.values())
    assert all(p.probe is None and p.claims is None for p in PROVIDERS.values())
    # ``auto`` asks them in a declared order: each has a place of its own in it.
    assert len({s.turn for s in SERVERS.values()}) == len(SERVERS)


def test_a_local_servers_probe_lives_in_its_module() -> None:
    """Adding a local server touches its module only: its probe (and what says a list is its
    server's) are defined beside its PROVIDER, and proxy/windows/ names no server."""
    for name, server in SERVERS.items():
        for asks in (server.probe, server.claims):
            if asks is None:
                continue
            module = importlib.import_module(asks.__module__)
            assert getattr(module, "PROVIDER", None) is server, (name, asks.__module__)
            assert inspect.getsourcefile(asks) == module.__file__
    # Its code, below the docstring that points at the providers' modules.
    tree = ast.parse((PROXY / "windows" / "servers.py").read_text())
    code = ast.unparse(tree.body[1:]).lower()
    modules = {s.probe.__module__.rsplit(".", 1)[1] for s in SERVERS.values() if s.probe}
    named = {"ollama", "llama.cpp", "vllm", "sglang", "lm studio", *SERVERS, *modules}
    assert not [n for n in named if n in code], "servers.py names a server: move it to its module"


def test_each_provider_has_its_transport() -> None:
    held = transports(object())  # type: ignore[arg-type]
    assert set(held) == set(get_args(TransportName))
    assert {p.transport for p in [*PROVIDERS.values(), *SERVERS.values()]} <= set(held)
