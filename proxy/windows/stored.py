"""What the store keeps of what was learned, read and forgotten without a running proxy (the
``contextwarden windows`` and ``contextwarden capabilities`` commands, proxy/cli.py): a quick
start has no admin API, and a wrong lesson must be forgettable all the same.

A running proxy keeps what it learned in memory too: it forgets what this removed at its next
start (or, with a shared store, at its next sync); ``DELETE /admin/learned-windows/…`` and
``DELETE /admin/learned-capabilities/…`` forget it in a running one.
"""

from __future__ import annotations

from proxy.stores.protocol import Store
from proxy.upstreams.capabilities import served_in, served_key
from proxy.windows.discovery import STORE_KEY as DISCOVERED_KEY
from proxy.windows.knowledge import (
    ACCEPTED_KEY,
    AT_KEY,
    LARGEST_KEY,
    PREFIXES,
    REFUSALS_KEY,
    REFUSED_KEY,
)
from proxy.windows.learned import from_store_key

# What each stored figure is, by its key's prefix (the calibration's by their own names).
NAMES = {
    "": "window",
    REFUSED_KEY: "refused",
    ACCEPTED_KEY: "accepted",
    REFUSALS_KEY: "refusals",
    LARGEST_KEY: "largest_prompt_taken",
    AT_KEY: "learned_at",
}

Lessons = dict[str, dict[str, dict[str, int]]]


def lessons(stored: dict[str, int]) -> Lessons:
    """Per scope (a team, or in passthrough ``team~caller``) and model, what the store keeps:
    the window an overflow stated, the bounds learned without figures, the calibration and
    when it was learned."""
    out: Lessons = {}
    for key, value in stored.items():
        if key.startswith(DISCOVERED_KEY):
            continue
        prefix = next((p for p in PREFIXES if key.startswith(p)), "")
        scoped = from_store_key(key.removeprefix(prefix))
        if scoped is None or (not prefix and "\t" in scoped[1]):
            continue  # another kind of setting
        name = NAMES.get(prefix, prefix.rstrip("\t"))
        out.setdefault(scoped[0], {}).setdefault(scoped[1], {})[name] = value
    return out


def keys_of(stored: dict[str, int], model: str, scope: str | None = None) -> list[str]:
    """The store's keys of what was learned about ``model`` (for ``scope``, else for all)."""
    out = []
    for key in stored:
        if key.startswith(DISCOVERED_KEY):
            continue
        prefix = next((p for p in PREFIXES if key.startswith(p)), "")
        scoped = from_store_key(key.removeprefix(prefix))
        if scoped is not None and scoped[1] == model and scope in (None, scoped[0]):
            out.append(key)
    return out


async def forget_window(store: Store, model: str, scope: str | None) -> list[str]:
    """Forget what was learned about ``model`` (for ``scope``, else for every scope); the
    scopes it was learned for."""
    stored = await store.learned_windows()
    keys = keys_of(stored, model, scope)
    if keys:
        await store.forget_learned(keys)
    return sorted(lessons({k: stored[k] for k in keys}))


async def capabilities(store: Store) -> dict[str, list[str]]:
    """Per scope, the upstreams whose compactions the proxy answers, as the store keeps."""
    out: dict[str, list[str]] = {}
    for scope, upstream in sorted(served_in(await store.learned_windows())):
        out.setdefault(scope, []).append(upstream)
    return out


async def forget_capability(store: Store, scope: str, upstream: str) -> bool:
    key = served_key(scope, upstream)
    had = key in await store.learned_windows()
    if had:
        await store.forget_learned([key])
    return had
