"""What a local server's probe (window discovery, proxy/windows/discovery.py) is given and gives
back. Each local server's provider holds its own probe, which asks that server's endpoints only:
proxy/windows/servers.py hands it an ``Asking`` and keeps what it says, and never names a
server.

A probe is given the ``Asking`` and the model's name, and returns what the server said
(``Said``), or None when the server is not that one or says nothing. Every figure is held to
the sane range of a window (``Asking.sane``, proxy/windows/sane.py): outside it, the server
said nothing. Under ``discovery: auto``, a server whose cards in the OpenAI-compatible list
name it (its provider's ``claims``) is the one asked; else each that names itself nowhere there
is asked in turn (its provider's ``turn``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

# (method, url, JSON body or None) -> the answer's JSON when its status is 200, else None.
Get = Callable[[str, str, Any], Awaitable[Any]]

# What a server that sizes a model's context at load time gives it, at least, when its config
# does not say (Ollama's least default; LM Studio's default load context).
LOAD_DEFAULT = 4096


@dataclass(kw_only=True, frozen=True, slots=True)
class Said:
    """A window as one server stated it: where (``field``), and whether it may change once
    the model is loaded (``provisional``)."""

    window: int
    server: str
    field: str
    provisional: bool = False


@dataclass(kw_only=True, frozen=True, slots=True)
class Asking:
    """How a probe asks the server: ``get`` (a GET or a POST of JSON, answered with the parsed
    JSON of a 200, else None), the OpenAI-compatible ``base`` (ending in /v1 or whatever was
    configured) and the server's ``root`` (where its own API lives), and ``sane``: a figure as
    a window, or None when it is outside the sane range."""

    get: Get
    base: str
    root: str
    sane: Callable[[object], int | None]

    def figure(self, value: Any) -> int | None:
        """A JSON figure a server stated, as a window: a number within the sane range, else
        None."""
        return None if isinstance(value, str) else self.sane(value)


# A local server's probe: (how to ask it, the model) -> what it said, or None.
Probe = Callable[[Asking, str], Awaitable[Said | None]]
# Whether the cards of the OpenAI-compatible list (``GET {base}/models``) are a server's.
Claim = Callable[[list[dict[str, Any]]], bool]


def objects(value: Any) -> list[dict[str, Any]]:
    """The JSON objects of a JSON list; none for anything else."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
