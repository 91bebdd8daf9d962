"""The dependency audit of CI: the hash-locked set (requirements.lock) against known advisories.

0. Offline, first: no pin is a release of .ci/known_bad.toml (a compromised release, which a
   mirror or a cache may still serve when the registry has deleted it and the advisory
   databases have no entry for it yet).
1. pip-audit (PyPA's advisory database, through PyPI's JSON API) on the lock, strictly: every
   pinned package must be audited. Where it can reach that API this is the audit.
2. Where it cannot (a network that reaches PyPI's index and project pages but neither OSV nor
   PyPI's per-version pages, as this project's CI), it says so, and the registry audit runs on
   what the registry does serve, each project's page (``/pypi/NAME/json``):
   - every pinned version is still on PyPI (a compromised release is removed by deleting it:
     litellm 1.82.7 and 1.82.8 were) and not yanked;
   - every hash in the lock is a file PyPI serves for that version (a lock made through a
     mirror or cache that served other bytes is caught);
   - a pin that is its project's newest release has the advisories PyPI lists for it read in
     full; for an older pin the advisories against the newest release are shown, and the run
     says how many pins could not be audited for advisories here.

Exit status: 0 when the audit found nothing, 1 when it found something (or could not run).
``python .ci/audit.py requirements.lock``

``--accept ID`` (repeated) lets one advisory pass, by its id or any of its aliases (CVE, GHSA,
PYSEC): for an advisory without a fix that cannot reach the locked set's use, said where the
command is run (.ci/run), with why. A known-bad release is never accepted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PYPI = "https://pypi.org/pypi/{name}/json"
KNOWN_BAD = Path(__file__).with_name("known_bad.toml")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")

Fetch = Callable[[str], dict[str, Any] | None]  # a project's page, None when it has none


@dataclass
class Pin:
    name: str
    version: str
    hashes: set[str] = field(default_factory=set)


def pins(lock: str) -> list[Pin]:
    """The lock's pins with their hashes (a pin's lines continue with backslashes)."""
    out: list[Pin] = []
    for line in lock.splitlines():
        found = _PIN.match(line)
        if found:
            out.append(Pin(found.group(1).lower(), found.group(2)))
        if out and (found or line.startswith(" ")):
            out[-1].hashes |= set(_HASH.findall(line))
    return out


def known_bad(lock: str, releases: list[dict[str, Any]]) -> list[str]:
    """The lock's pins that are known-bad releases, each said with what it did and where."""
    bad = {(_canonical(r["package"]), str(r["version"])): r for r in releases}
    found = [(pin, bad.get((_canonical(pin.name), pin.version))) for pin in pins(lock)]
    return [
        f"{pin.name}=={pin.version}: a known-bad release ({r['what']}; {r['source']})"
        for pin, r in found
        if r is not None
    ]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def fetch(name: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(PYPI.format(name=name), timeout=60) as answer:
            data: dict[str, Any] = json.load(answer)
            return data
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def check(
    pin: Pin, page: dict[str, Any] | None, accepted: frozenset[str] = frozenset()
) -> tuple[list[str], list[str], bool]:
    """(problems, notes, advisories read in full) for one pin, from its project's page, the
    advisories ``accepted`` (by id or alias) left out."""
    where = f"{pin.name}=={pin.version}"
    if page is None:
        return [f"{where}: the project is not on PyPI"], [], False
    files = page.get("releases", {}).get(pin.version)
    if not files:
        return (
            [f"{where}: not on PyPI (a deleted release: how compromised ones are removed)"],
            [],
            False,
        )
    problems: list[str] = []
    if all(f.get("yanked") for f in files):
        reason = files[0].get("yanked_reason") or "no reason given"
        problems.append(f"{where}: yanked ({reason})")
    served = {f.get("digests", {}).get("sha256") for f in files}
    strangers = sorted(pin.hashes - served)
    if strangers:
        problems.append(f"{where}: hash {strangers[0]} is no file PyPI serves for it")
    if not pin.hashes:
        problems.append(f"{where}: pinned without a hash")
    advisories = [
        v
        for v in page.get("vulnerabilities", [])
        if not v.get("withdrawn") and not accepted & {v.get("id"), *(v.get("aliases") or [])}
    ]
    newest = page.get("info", {}).get("version") == pin.version
    named = ", ".join(sorted(str(v.get("id")) for v in advisories))
    if newest and advisories:
        problems.append(f"{where}: known vulnerabilities {named}")
    notes = (
        [f"{where}: the newest release has advisories {named}"] if advisories and not newest else []
    )
    return problems, notes, newest


def registry_audit(lock: str, get: Fetch = fetch, accepted: frozenset[str] = frozenset()) -> int:
    found = pins(lock)
    with ThreadPoolExecutor(8) as pool:
        pages = list(pool.map(lambda p: get(p.name), found))
    problems, notes, full = [], [], 0
    for pin, page in zip(found, pages, strict=True):
        bad, said, newest = check(pin, page, accepted)
        problems += bad
        notes += said
        full += newest
    for note in notes:
        print(f"note: {note}")
    print(
        f"registry audit: {len(found)} pins checked on PyPI with their hashes; advisories read "
        f"in full for the {full} that are their project's newest release, not for the other "
        f"{len(found) - full} (PyPI's per-version pages and OSV are unreachable here)"
    )
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0


def pip_audit(
    lock_path: Path, accepted: frozenset[str] = frozenset()
) -> tuple[int, dict[str, Any] | None]:
    """pip-audit's exit status and its JSON report (None when it wrote none)."""
    command = [
        sys.executable, "-m", "pip_audit", "--strict", "--disable-pip", "--require-hashes",
        "--progress-spinner", "off", "-f", "json", "-r", str(lock_path),
    ]  # fmt: skip
    for advisory in sorted(accepted):
        command += ["--ignore-vuln", advisory]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(done.stderr[-3000:])
        return done.returncode, None


def unreachable(report: dict[str, Any] | None) -> bool:
    """Whether pip-audit could not read the advisories at all (every package skipped)."""
    deps = (report or {}).get("dependencies", [])
    return bool(deps) and all("skip_reason" in d for d in deps)


def main(argv: list[str]) -> int:
    args = argv[1:]
    accepted = frozenset(args[i + 1] for i, a in enumerate(args[:-1]) if a == "--accept")
    positional = [
        a for i, a in enumerate(args) if a != "--accept" and args[i - 1 : i] != ["--accept"]
    ]
    lock_path = Path(positional[0] if positional else "requirements.lock")
    releases = tomllib.loads(KNOWN_BAD.read_text())["release"]
    bad = known_bad(lock_path.read_text(), releases)
    for problem in bad:
        print(f"FAIL {problem}")
    if bad:
        return 1
    print(f"known-bad releases: none of the {len(releases)} in {KNOWN_BAD.name} is pinned")
    for advisory in sorted(accepted):
        print(f"accepted (not a failure): {advisory}")
    status, report = pip_audit(lock_path, accepted)
    if status == 0:
        print(f"pip-audit: no known vulnerabilities in {lock_path}")
        return 0
    if report is not None and not unreachable(report):
        for dep in report.get("dependencies", []):
            for vuln in dep.get("vulns", []):
                fixed = vuln.get("fix_versions")
                print(f"FAIL {dep['name']}=={dep['version']}: {vuln['id']} (fixed in {fixed})")
            if "skip_reason" in dep:
                print(f"FAIL {dep['name']}: not audited: {dep['skip_reason']}")
        return 1
    print(
        "pip-audit could not read any advisory: PyPI's per-version pages "
        "(/pypi/NAME/VERSION/json) and OSV are unreachable from here; the registry audit runs "
        "on what PyPI does serve"
    )
    return registry_audit(lock_path.read_text(), accepted=accepted)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
