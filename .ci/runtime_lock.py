"""The image's lock: the pins of requirements.lock that the runtime needs (with the otel extra:
an image exports OpenTelemetry when its OTEL_* variables say so), nothing of the dev
extra (no pytest, ruff, mypy, pip-audit, build backend...).

Not a second resolution: every line is requirements.lock's own (the same versions, the same
hashes, the same markers), so the image runs exactly the versions CI tested, fewer of them. A
pin is kept when pyproject.toml's ``dependencies`` or its otel extra name it, or when a kept pin
is among the packages its ``# via`` lines say need it (uv writes them). ``pip install
--require-hashes`` refuses a set that lacks a dependency, so a pin left out here fails the
image's build, never its run; tests/test_supply_chain.py checks the result against what is
installed.

The installer's lock (requirements-pip.lock) is the lock's own ``pip`` pin alone: a new
virtualenv's bundled pip may be too old to resolve the lock in hash-checking mode (pip 23.2
refuses an extra a locked package asks of another, ``httpx[http2]``), so every install takes
pip from it first, hash-checked like the rest.

``python .ci/runtime_lock.py`` rewrites both (.ci/lock runs it); ``--check`` says whether
they are up to date. Standard library only.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
OUT = ROOT / "requirements-runtime.lock"
PIP = ROOT / "requirements-pip.lock"
PROJECT = "contextwarden"
# The image's one extra: the OpenTelemetry export (off unless OTEL_* variables are set).
IMAGE_EXTRA = "otel"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
HEADER = """\
# requirements-runtime.lock: requirements.lock's pins the runtime and the otel extra need, made
# by .ci/runtime_lock.py (run by .ci/lock); do not edit. The Dockerfile's image installs it:
#   pip install --require-hashes -r requirements-runtime.lock
"""


@dataclass
class Entry:
    name: str
    text: str  # its lines, as the lock has them
    parents: list[str] = field(default_factory=list)  # the packages its ``# via`` names


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def entries(lock: str) -> list[Entry]:
    """The lock's pins, each with its lines and what needs it (a name may be pinned twice,
    under two markers)."""
    out: list[Entry] = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", lock):
        found = _NAME.match(block)
        if found is None or "==" not in block.split("\n", 1)[0]:
            continue  # the header
        via = block.split("# via", 1)[1] if "# via" in block else ""
        parents = [p.strip("# ").split(" (")[0] for p in via.splitlines()]
        out.append(Entry(canonical(found.group()), block.rstrip("\n"), [p for p in parents if p]))
    return out


def runtime(lock: str, pyproject: str) -> str:
    """The runtime lock's text, from the full lock's and pyproject.toml's."""
    project = tomllib.loads(pyproject)["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"].get(IMAGE_EXTRA, [])]
    needed = {canonical(_NAME.match(r).group()) for r in wanted}  # type: ignore[union-attr]
    pins = entries(lock)
    grew = True
    while grew:
        grew = False
        for pin in pins:
            if pin.name not in needed and any(
                canonical(p) in needed for p in pin.parents if p != PROJECT
            ):
                needed.add(pin.name)
                grew = True
    return HEADER + "".join(f"{pin.text}\n" for pin in pins if pin.name in needed)


PIP_HEADER = """\
# requirements-pip.lock: requirements.lock's pin of pip alone, made by .ci/runtime_lock.py (run
# by .ci/lock); do not edit. Installed first, so the lock is resolved by the pip it pins:
#   pip install --require-hashes -r requirements-pip.lock
"""


def installer(lock: str) -> str:
    """The installer's lock's text: the full lock's ``pip`` entry, as it stands there."""
    pins = [pin for pin in entries(lock) if pin.name == "pip"]
    if len(pins) != 1:
        raise SystemExit("requirements.lock must pin pip exactly once")
    return PIP_HEADER + f"{pins[0].text}\n"


def main(argv: list[str]) -> int:
    lock = LOCK.read_text()
    made = {
        OUT: runtime(lock, (ROOT / "pyproject.toml").read_text()),
        PIP: installer(lock),
    }
    if "--check" in argv:
        stale = [path.name for path, text in made.items() if path.read_text() != text]
        for name in stale:
            print(f"{name} is out of date: run .ci/runtime_lock.py")
        return 1 if stale else 0
    for path, text in made.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
