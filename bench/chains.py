"""``python -m bench.chains``: what the checkpoint chains' memory saves, in process, on the
118k-token resend: a conversation's hash chain (strategies/checkpoints/chain.py
``prefix_chain``) made cold, made again from the same message objects (its next request's,
handed on by the request items), and made from new objects of the same content (a request
whose items were parsed afresh). Best of 20 each, on one conversation, in one run.

The chain is made on every request that looks for a checkpoint (summaries on and the
conversation past the soft limit), which the HTTP benchmarks' requests never do: this is the
figure that shows what its memory saves."""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable

import orjson

from bench.__main__ import resend_body
from strategies.bounded_memory import DigestMemo, ObjectMemo
from strategies.checkpoints import chain
from strategies.checkpoints.chain import prefix_chain


def best(work: Callable[[], object], runs: int = 20) -> float:
    fastest = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest * 1000


def main() -> int:
    messages = orjson.loads(resend_body(118_000))["messages"]

    def cold() -> None:
        chain._DIGESTS, chain._BY_OBJECT = DigestMemo(), ObjectMemo()
        prefix_chain(messages)

    made = best(cold)
    prefix_chain(messages)
    same = best(lambda: prefix_chain(messages))
    copies = iter([copy.deepcopy(messages) for _ in range(20)])
    fresh = best(lambda: prefix_chain(next(copies)))
    print(f"checkpoint chain of the 118k-token resend ({len(messages)} messages):")
    print(f"  without its memory (made cold)          {made:.2f} ms")
    print(f"  the same message objects (items reused) {same:.2f} ms ({made / same:.1f}x faster)")
    print(f"  new objects, the same content           {fresh:.2f} ms ({made / fresh:.1f}x faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
