"""Shadow mode's cost on the request path: the pass-through floor, the proxy enforcing (its
default team) and the proxy in shadow mode (its ``shadow`` team, ``mode: shadow``), the same
requests to each, in blocks taken in turn (so a shadow plan, made after its answer, lands on the
next shadow request, as it would under a client's own traffic).

Shadow mode forwards the client's bytes and plans after; its figure beside the floor and beside
the enforced proxy's on the requests that fit (which the enforced proxy forwards untouched: its
pass-through) is what shadow mode adds.
"""

from __future__ import annotations

import time

from bench.client import Connection

Case = tuple[str, str, list[bytes]]  # its label, its path, its requests in order
LABELS = ("floor", "enforced", "shadow")
HEADER = [
    "measure",
    "floor",
    "enforced",
    "shadow",
    "enforced over floor",
    "shadow over floor",
    "shadow over enforced",
]


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def measure(
    floor: int, proxy: int, case: Case, rounds: int
) -> tuple[dict[str, list[float]], list[bool]]:
    """Each label's latencies (seconds) for ``case``'s requests sent ``rounds`` times, a
    block of them to each in turn; and which ones the enforced proxy trimmed (its first
    round's answers)."""
    _, path, bodies = case
    seen: dict[str, list[float]] = {label: [] for label in LABELS}
    trimmed: list[bool] = []
    conns = {
        "floor": await Connection.open("127.0.0.1", floor),
        "enforced": await Connection.open("127.0.0.1", proxy),
        "shadow": await Connection.open("127.0.0.1", proxy, team="shadow"),
    }
    for conn in conns.values():  # each connection warm (and the proxy's upstream pool)
        await conn.post(path, bodies[0])
    for k in range(rounds):
        for label, conn in conns.items():
            for body in bodies:
                t = time.perf_counter()
                status, _ = await conn.post(path, body)
                seen[label].append(time.perf_counter() - t)
                if status != 200:
                    raise RuntimeError(f"{case[0]}: status {status} from {label}")
                if label == "enforced" and k == 0:
                    actions = conn.last_headers.get("x-contextwarden-actions", "none")
                    trimmed.append(actions != "none")
    for conn in conns.values():
        await conn.close()
    return seen, trimmed


def row(name: str, seen: dict[str, list[float]], keep: list[bool] | None = None) -> list[str]:
    def ms(label: str) -> float:
        values = seen[label]
        if keep is not None:  # the same requests in every round
            values = [x for i, x in enumerate(values) if keep[i % len(keep)]]
        return p50(values) * 1000

    f, e, s = (ms(label) for label in LABELS)
    return [
        name,
        f"{f:.2f} ms",
        f"{e:.2f} ms",
        f"{s:.2f} ms",
        f"{e - f:+.2f} ms",
        f"{s - f:+.2f} ms",
        f"{s - e:+.3f} ms",
    ]


async def shadow_rows(
    floor: int, proxy: int, small: list[Case], agent: list[Case], rounds: int
) -> list[list[str]]:
    """p50 rows: ``small`` (one request repeated), then ``agent`` (conversations that the
    enforced proxy partly trims: the requests that fit apart, where it passes them through)."""
    rows = []
    for case in small:
        seen, _ = await measure(floor, proxy, case, rounds)
        rows.append(row(f"latency p50, {case[0]}", seen))
    for case in agent:
        seen, trimmed = await measure(floor, proxy, case, rounds)
        label = f"{case[0]} ({sum(trimmed)}/{len(trimmed)} trimmed when enforced)"
        rows.append(row(f"latency p50, {label}", seen))
        fitting = [not t for t in trimmed]
        if any(fitting):
            rows.append(row(f"latency p50, {case[0]}, fitting only", seen, fitting))
    return rows
