"""The shared store's Redis found through Redis Sentinel: a client of whichever server the
Sentinels name the primary, before and after a failover.

redis-py's own Sentinel client does the work (``redis.asyncio.sentinel``): a new connection asks
the Sentinels for the primary's address (the first that answers; a Sentinel down is skipped),
and a connection to a primary since demoted gets READONLY, which redis-py turns into a
ConnectionError and a new connection, to the new primary. Two things are added:

- the retry: a command that lands mid-failover (the primary gone, the Sentinels not agreed on
  the next) fails with a ConnectionError (no primary named, a refused connection); it is tried
  again a few times a short backoff apart while the store's timeout (``GuardedStore``) allows,
  and past it the store rests as after any fault: the call after the rest asks the Sentinels
  afresh. A failover costs the requests meanwhile their summaries (fresh cuts), not answers;
- the check: redis-py asks the Sentinels only when it connects, and an old primary that is
  still up after a failover (one an operator's ``SENTINEL FAILOVER`` moved away from) takes
  writes until the Sentinels demote it, up to ten seconds later, writes it then drops when it
  copies the new primary. The pool asks the Sentinels at most every ``CHECK_SECONDS`` as a
  connection is taken, and moves its connections to the new primary once they name one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

CHECK_SECONDS = 1.0


@dataclass(frozen=True, kw_only=True)
class SentinelTarget:
    """Where the store's primary is found, and how to log in (``checkpoints:`` in the
    configuration: ``sentinel_nodes``, ``service_name`` ...)."""

    nodes: list[tuple[str, int]]
    """The Sentinels, host and port each; asked in turn until one answers."""
    service_name: str
    """The name the Sentinels monitor the primary by (``sentinel monitor <name> ...``)."""
    sentinel_password: str | None = None
    """The Sentinels' own password (``requirepass`` in sentinel.conf), if they have one."""
    password: str | None = None
    """The primary's and replicas' password (``requirepass``), if they have one."""
    db: int = 0


def connect(target: SentinelTarget, timeout: float) -> tuple[Sentinel, Redis]:
    """The Sentinels' client, and a client of the primary they name that follows it through
    failovers (both to close); each socket bounded by ``timeout``, as the standalone store's."""
    sockets = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    # Each Sentinel asked in turn gets a share of the timeout and no retry of its own (redis-py
    # would try one that is down ten times): the next is asked instead, and the primary after.
    share = timeout / (len(target.nodes) + 1)
    asking: dict[str, Any] = {"socket_timeout": share, "socket_connect_timeout": share}
    asking |= {"retry": Retry(NoBackoff(), 0), "password": target.sentinel_password}
    # redis-py's Sentinel and its pool are not annotated: the ignores below say only that.
    sentinel = Sentinel(target.nodes, sentinel_kwargs=asking, **sockets)  # type: ignore[no-untyped-call]
    primary = sentinel.master_for(
        target.service_name,
        connection_pool_class=FollowingPool,
        password=target.password,
        db=target.db,
        retry=_retry(),
    )
    return sentinel, primary


def _retry() -> Retry:
    # 50, 100, 200, 250, 250 ms apart: a failover that redis-py sees as an error (READONLY, no
    # primary named, a refused connection) is mostly over within a second once the Sentinels
    # start it; the store's timeout cuts the retries short on a longer one.
    return Retry(ExponentialBackoff(cap=0.25, base=0.05), 5, (RedisConnectionError,))


class FollowingPool(SentinelConnectionPool):
    """redis-py's Sentinel pool, asking the Sentinels which server is the primary at most every
    ``CHECK_SECONDS`` as a connection is taken. When they name another, redis-py's own pool
    closes the idle connections (the next use connects to the new primary), and those in use
    are closed when they come back."""

    _checked = 0.0

    async def get_connection(self, *args: Any, **options: Any) -> AbstractConnection:
        if self.master_address is not None and time.monotonic() >= self._checked + CHECK_SECONDS:
            self._checked = time.monotonic()
            await self._follow()
        taken = super().get_connection(*args, **options)  # type: ignore[no-untyped-call]
        connection: AbstractConnection = await taken
        return connection

    async def _follow(self) -> None:
        before = self.master_address
        try:
            await self.get_master_address()  # type: ignore[no-untyped-call]
        except RedisConnectionError:  # no Sentinel answers or names one: keep what works
            return
        if self.master_address != before:
            await self.update_active_connections_for_reconnect()  # type: ignore[no-untyped-call]
