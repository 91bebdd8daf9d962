"""``contextwarden serve``: one process, or ``workers`` processes on one listening port.

With ``workers: 1`` the app runs in this process. With more, uvicorn's supervisor binds the
port once and starts that many worker processes (spawned: each loads the same configuration
afresh, ``worker_app``), starts another when one dies, and stops them all on SIGTERM or SIGINT.
Each worker is a whole proxy with its own caches and memory budget; what they share goes
through the store: an SQLite file in WAL mode is safe for the processes of one machine (its
locks are rows in the file), Redis for replicas on several (docs/operations.md).

A shutdown (SIGTERM, SIGINT) turns ``/ready`` to 503 at once (proxy/edge/readiness.py), stops
accepting connections, closes the idle ones, and gives the requests in flight (streams)
``shutdown_grace_seconds`` to finish; any still running then are cut. The background work
(summaries being made, the store's writes) is drained last, and the store closed.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette

from proxy.config.settings import Settings, load_settings

FRAME_SLACK = 1 << 20
WORKER_ARGS = "CONTEXTWARDEN_WORKER_ARGS"  # what each worker loads: the parent's config path


def serve(settings: Settings, path: str | None, overrides: dict[str, Any]) -> None:
    """Serve ``settings`` (loaded from ``path``, then ``overrides``, the command line's)."""
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "loop": "auto",
        "http": "auto",
        "server_header": False,
        "date_header": False,
        "log_level": "info",
        "access_log": False,  # the proxy writes its own JSON line per request
        "timeout_graceful_shutdown": settings.shutdown_grace_seconds,
        # A Responses WebSocket frame is a request body: the same limit (uvicorn's is 16 MiB),
        # with room for the frame's own fields, so that a frame a little over it gets an error
        # frame that says so (proxy/edge/websockets.py); the server closes on a larger one
        # (1009, message too big) before holding it whole.
        "ws_max_size": settings.limits.max_body_bytes + FRAME_SLACK,
    }
    if settings.workers == 1:
        from proxy.app import create_app

        uvicorn.run(create_app(settings), **options)
        return
    # A spawned worker inherits the environment: it loads the same file with the same flags.
    os.environ[WORKER_ARGS] = orjson.dumps({"config": path, "overrides": overrides}).decode()
    uvicorn.run(f"{__name__}:worker_app", factory=True, workers=settings.workers, **options)


def worker_app() -> Starlette:
    """One worker's app (uvicorn calls it in each worker process)."""
    from proxy.app import create_app

    args = orjson.loads(os.environ[WORKER_ARGS])
    configure_logging()
    return create_app(load_settings(args["config"]).model_copy(update=args["overrides"]))


def configure_logging() -> None:
    """The access log (one JSON line per request) and warnings, to stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    # Nothing logged here shows where or in which thread or process it was made, so records
    # do not gather it (the logging HOWTO's "Optimization"): each record looked up its caller's
    # frame and asked the kernel for the process id, a system call, about 25 us a request on
    # this 2-core VM (bench: small chat requests at concurrency 16, A/B in one run).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logger = logging.getLogger("contextwarden")
    if not logger.handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
