"""Summary checkpoints, one module per concern:

    compactor.py   find, reuse, create, update, pre-compute (the orchestration)
    job.py         one checkpoint's making: the Job that travels, the chained calls
    flight.py      one summary per conversation at a time, in-process and across replicas
    llm.py         the summarizer call through litellm, and who the summarizer is (its target)
    breaker.py     skip a summarizer that keeps failing
    allowance.py   the calls and time one request, and one team, may spend

The decisions themselves (reuse or create, where to cut, how big a piece) are pure and live in
``strategies.checkpoint`` and ``strategies.summary``.
"""

from proxy.summaries.compactor import Compacted, Compactor
from proxy.summaries.job import Context

__all__ = ["Compacted", "Compactor", "Context"]
