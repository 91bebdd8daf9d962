"""The set tested is the set installed: one hash-locked lock (requirements.lock), generated from
pyproject.toml, installed by .ci/run, the Dockerfile's build stage and the README's two commands
(the image holds its runtime part, requirements-runtime.lock, as a user that is not root); the releases
of litellm that shipped a credential stealer are excluded; the audit (.ci/audit.py) fails on
what it is there to catch. No network: the audit's registry is a table here."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
INSTALL = re.compile(r"pip install [^\n&]*--require-hashes -r requirements\.lock")
INSTALLER = re.compile(r"pip install [^\n&]*--require-hashes -r requirements-pip\.lock")
PROJECT = re.compile(r"pip install [^\n&]*--no-deps --no-build-isolation (-e )?\.")
KNOWN_BAD = ROOT / ".ci" / "known_bad.toml"


def locked() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", LOCK.read_text(), re.M)
    return {name.lower().replace("_", "-"): version for name, version in pins}


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in [*project["dependencies"], *extras["dev"], *extras["otel"]]]


def test_every_declared_dependency_is_locked_within_its_range() -> None:
    pins = locked()
    for requirement in declared():
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is in pyproject.toml but not in the lock: run .ci/lock"
        assert Version(pins[name]) in requirement.specifier, (
            f"{name}=={pins[name]} is outside {requirement.specifier}: run .ci/lock"
        )


def test_every_pin_carries_hashes() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text().split("\n", 3)[3])
    names = re.findall(r"^[A-Za-z0-9][A-Za-z0-9._-]*==", LOCK.read_text(), re.M)
    assert len(entries) == len(names) > 50  # a name may be pinned twice, under two markers
    for entry in entries:
        assert "--hash=sha256:" in entry, entry.splitlines()[0]


def known_bad() -> list[dict[str, Any]]:
    releases: list[dict[str, Any]] = tomllib.loads(KNOWN_BAD.read_text())["release"]
    return releases


def test_every_known_bad_release_says_what_and_where() -> None:
    releases = known_bad()
    assert releases
    for release in releases:
        assert set(release) == {"package", "version", "date", "what", "source"}, release
        assert isinstance(release["date"], date) and all(release[k] for k in release)
        Version(release["version"])  # a version pip can compare


@pytest.mark.parametrize("release", known_bad(), ids=lambda r: f"{r['package']}=={r['version']}")
def test_no_known_bad_release_can_be_installed(release: dict[str, Any]) -> None:
    """#55: litellm 1.107.0 was announced compromised (an implant run at interpreter start)
    and pyproject.toml admitted it; the guard knew only the first incident's two releases.
    Each release of .ci/known_bad.toml is excluded by the specifier of a package the project
    declares, and pinned by neither lock."""
    name, version = release["package"].lower(), release["version"]
    for requirement in declared():
        if requirement.name.lower() == name:
            assert not requirement.specifier.contains(version, prereleases=True), (
                f"pyproject.toml admits {name}=={version} ({release['what']}): add !={version}"
            )
    for lock in (LOCK, ROOT / "requirements-runtime.lock"):
        assert audit().known_bad(lock.read_text(), [release]) == []


def test_ci_installs_from_the_lock() -> None:
    text = (ROOT / ".ci" / "run").read_text()
    assert INSTALL.search(text) and PROJECT.search(text)
    assert not re.search(r"pip install[^\n]*-e '?\.\[dev\]", text)
    assert "--upgrade pip" not in text  # pip itself comes from the lock


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (instruction, arguments), its continued lines
    joined and its comments left out."""
    lines = [
        ln
        for ln in (ROOT / "Dockerfile").read_text().splitlines()
        if not ln.lstrip().startswith("#")
    ]
    out: list[list[tuple[str, str]]] = []
    for line in re.sub(r"\\\n", " ", "\n".join(lines)).splitlines():
        if line.strip():
            instruction, _, args = line.strip().partition(" ")
            if instruction.upper() == "FROM":
                out.append([])
            out[-1].append((instruction.upper(), " ".join(args.split())))
    return out


def test_the_image_is_built_with_the_locked_toolchain() -> None:
    """The wheel is built by the set CI tests: the whole lock, hashes required, then the
    project with nothing more resolved."""
    build = " ".join(args for op, args in stages()[0] if op == "RUN")
    assert INSTALL.search(build)
    assert re.search(r"pip wheel [^&]*--no-deps --no-build-isolation [^&]*\.", build)
    assert "--upgrade pip" not in build


def test_the_image_runs_as_no_root_and_holds_no_dev_tool() -> None:
    """#55, F10: the image installed the test tools (the whole lock: pytest, ruff, mypy,
    pip-audit...) and ran as root. Its last stage installs only the runtime's part of the lock
    and the project's wheel, and runs as a user of its own."""
    final = stages()[-1]
    users = [args for op, args in final if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    runs = [args for op, args in final if op == "RUN"]
    installs = [c.strip() for run in runs for c in run.split("&&") if "pip install" in c]
    assert installs == [
        "pip install --no-cache-dir --require-hashes -r requirements-runtime.lock",
        "pip install --no-cache-dir --no-deps /wheels/*.whl",
    ], installs
    copied = " ".join(args for op, args in final if op == "COPY")
    assert "requirements.lock" not in copied and "tests" not in copied
    assert not re.search(r"\[dev\]|pytest|ruff|mypy", " ".join(runs))


def runtime_lock() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ci_runtime_lock", ROOT / ".ci" / "runtime_lock.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_runtime_lock"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_runtime_lock_is_the_locks_runtime_part() -> None:
    """requirements-runtime.lock is what .ci/runtime_lock.py makes of the lock now, line for
    line the lock's own pins, and holds every distribution the runtime and the otel extra
    install here and none that only the dev extra brings."""
    from tests.test_packaging import closure

    made = runtime_lock().runtime(LOCK.read_text(), (ROOT / "pyproject.toml").read_text())
    text = (ROOT / "requirements-runtime.lock").read_text()
    assert text == made, "requirements-runtime.lock is out of date: run .ci/runtime_lock.py"
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 3)[3])
    assert all(entry in LOCK.read_text() for entry in entries)
    pinned = set(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", text, re.M))
    pinned = {re.sub(r"[-_.]+", "-", n).lower() for n in pinned}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = closure(project["dependencies"])
    dev_only = closure(project["optional-dependencies"]["dev"]) - runtime
    assert runtime <= pinned, runtime - pinned
    # The image exports OpenTelemetry when its OTEL_* variables ask (the otel extra).
    otel = closure(project["optional-dependencies"]["otel"])
    assert otel <= pinned and "opentelemetry-exporter-otlp-proto-http" in otel, otel - pinned
    assert not pinned & dev_only, pinned & dev_only
    assert {"pytest", "ruff", "mypy", "pip-audit", "setuptools"} <= dev_only


def installs_pip_first(text: str) -> bool:
    """Whether ``text`` installs pip from requirements-pip.lock before it installs the lock."""
    first, lock = INSTALLER.search(text), INSTALL.search(text)
    return bool(first and lock and first.start() < lock.start())


def test_every_install_takes_pip_from_the_lock_first() -> None:
    """CI went red on a fresh machine: the venv's bundled pip (23.2) refused the lock in
    hash-checking mode over the ``httpx[http2]`` extra litellm asks. requirements-pip.lock is
    the lock's own pip pin, line for line, and CI, the README's two commands and the image's
    build all install it before the lock."""
    made = runtime_lock().installer(LOCK.read_text())
    text = (ROOT / "requirements-pip.lock").read_text()
    assert text == made, "requirements-pip.lock is out of date: run .ci/runtime_lock.py"
    assert re.search(r"^pip==\S+ \\\n\s+--hash=sha256:", text, re.M)
    assert text.split("\n", 3)[3].split("\n    # via")[0] in LOCK.read_text()
    assert installs_pip_first((ROOT / ".ci" / "run").read_text())
    assert installs_pip_first(" ".join(args for op, args in stages()[0] if op == "RUN"))
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.S)
    assert commands and all(installs_pip_first(c) for c in commands)


def test_the_readmes_two_commands_install_from_the_lock() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.S)
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    for command in commands:
        assert INSTALL.search(command) and PROJECT.search(command)


def audit() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_audit", ROOT / ".ci" / "audit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_audit"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


GOOD = "a" * 64
LOCKED = f"""# header
litellm==1.82.6 \\
    --hash=sha256:{GOOD}
    # via contextwarden
"""


def page(version: str = "1.82.6", **extra: Any) -> dict[str, Any]:
    files = [{"digests": {"sha256": GOOD}, "yanked": extra.pop("yanked", False)}]
    return {
        "info": {"version": extra.pop("newest", version)},
        "releases": {version: files},
        **extra,
    }


@pytest.mark.parametrize(
    ("served", "lock", "failure"),
    [
        (page(), LOCKED, None),
        (page(), LOCKED.replace("1.82.6", "1.82.7"), "not on PyPI"),  # deleted, as 1.82.7 was
        (page(), LOCKED.replace(GOOD, "b" * 64), "no file PyPI serves"),
        (page(yanked=True), LOCKED, "yanked"),
        (page(vulnerabilities=[{"id": "GHSA-x", "withdrawn": None}]), LOCKED, "GHSA-x"),
        (page(newest="1.90.0", vulnerabilities=[{"id": "GHSA-y"}]), LOCKED, None),
        (None, LOCKED, "not on PyPI"),
    ],
)
def test_the_registry_audit_fails_on_what_it_is_for(
    served: dict[str, Any] | None,
    lock: str,
    failure: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = audit().registry_audit(lock, lambda name: served)
    out = capsys.readouterr().out
    assert status == (0 if failure is None else 1), out
    if failure is not None:
        assert failure in out


@pytest.mark.parametrize(
    ("lock", "failure"),
    [
        (LOCKED.replace("1.82.6", "1.107.0"), "litellm==1.107.0: a known-bad release"),
        (LOCKED.replace("litellm==1.82.6", "LiteLLM==1.82.8"), "litellm==1.82.8"),
        (LOCKED, None),
    ],
)
def test_the_audit_fails_offline_on_a_known_bad_pin(
    lock: str, failure: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any advisory database is asked (none need be reachable): a lock pinning a
    release of .ci/known_bad.toml fails CI's audit, saying what the release did."""
    module = audit()
    path = tmp_path / "requirements.lock"
    path.write_text(lock)
    if failure is None:
        assert module.known_bad(lock, known_bad()) == []
        return
    assert module.main(["audit.py", str(path)]) == 1  # returns before pip-audit runs
    out = capsys.readouterr().out
    assert f"FAIL {failure}" in out
    assert "implant" in out or "stealer" in out  # what it did


def test_the_registry_audit_runs_only_when_pip_audit_could_read_nothing() -> None:
    module = audit()
    skipped = {"dependencies": [{"name": "a", "version": "1", "skip_reason": "not found"}]}
    assert module.unreachable(skipped)
    found = {"dependencies": [{"name": "a", "version": "1", "vulns": [{"id": "X"}]}]}
    assert not module.unreachable(found)


def test_an_accepted_advisory_passes_by_any_of_its_names_and_no_other_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """.ci/run accepts one advisory of checkov's lock by name (ecdsa's CVE-2024-23342, no fix);
    the same advisory under its other ids passes, any other still fails."""
    module = audit()
    advisory = {"id": "PYSEC-1", "aliases": ["CVE-2024-23342", "GHSA-z"]}
    served = page(vulnerabilities=[advisory, {"id": "GHSA-other"}])
    accepted = frozenset({"CVE-2024-23342"})
    assert module.registry_audit(LOCKED, lambda name: served, accepted) == 1
    out = capsys.readouterr().out
    assert "GHSA-other" in out and "PYSEC-1" not in out
    alone = page(vulnerabilities=[advisory])
    assert module.registry_audit(LOCKED, lambda name: alone, accepted) == 0
    assert module.registry_audit(LOCKED, lambda name: alone) == 1
