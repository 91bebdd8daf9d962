"""Summary checkpoints, one module per concern:

    decision.py    whether to summarize: every rule that decides it (compact now, prepare in
                   the background, reuse, refresh, make, or truncate a first-seen conversation)
    compactor.py   find, reuse, create, update, pre-compute (the orchestration)
    job.py         one checkpoint's making: the Job that travels, the chained calls
    handoff.py     the whole conversation in one summary (a client's own compaction, served)
    single_flight.py  one summary per conversation at a time, in-process and across replicas
    seen.py        which conversations came by before (the store's marks, a cache of them)
    llm.py         the summarizer call through litellm, and who the summarizer is (its target)
    breaker.py     skip a summarizer that keeps failing
    allowance.py   the calls and time one request, and one team, may spend

Where a summary cuts and how big a piece is are the engine's pure rules
(``strategies.checkpoints.chain``, ``strategies.checkpoints.cut``); whether one is made is
decision.py's.
"""

from proxy.summaries.compactor import Compacted, Compactor
from proxy.summaries.job import Context

__all__ = ["Compacted", "Compactor", "Context"]
