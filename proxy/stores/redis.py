"""The shared checkpoint store: Redis, for several proxy replicas.

Checkpoints of a conversation live in one hash (``cw:ck:<team>:<conversation>``) that expires
with the TTL and keeps at most ``max_per_conversation`` entries; single-flight locks are
``SET NX PX`` keys, so replicas summarize a conversation once between them; a quota's slots are
a sorted set taken by a script, so replicas share a team's quota. Every object a request made
is charged to its owner and the oldest evicted past the store's bounds, by one script per write
(proxy/stores/redis_quota.py).

The Redis is one server at a URL, or the primary a set of Redis Sentinels names, followed through
failovers (proxy/stores/sentinel.py). Not Redis Cluster: the scripts touch keys they are not
passed (the quota's accounting), which a cluster's slots forbid.
"""

from __future__ import annotations

import secrets

from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from proxy.stores.codec import dump, load
from proxy.stores.quota import Blob, Quota, Usage, charged
from proxy.stores.redis_quota import DROP, PUT, object_name
from proxy.stores.sentinel import SentinelTarget, connect
from strategies.checkpoints.chain import Checkpoint

LEARNED = "cw:learned"
# A quota's slots: a sorted set of the times they were taken, by Redis's own clock (one clock
# for every replica), counted and taken in one script (atomic).
TAKE_SLOT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], t, ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
return 1
"""
COUNT_SLOTS = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
return redis.call('ZCOUNT', KEYS[1], '(' .. (t - tonumber(ARGV[1])), '+inf')
"""


class RedisStore:
    def __init__(
        self,
        url: str | SentinelTarget,
        ttl_seconds: float,
        max_per_conversation: int,
        timeout: float = 1.0,
        quota: Quota | None = None,
    ) -> None:
        """``url``: redis://host:port/db, or the Sentinels that name the primary."""
        self._sentinel: Sentinel | None = None
        if isinstance(url, SentinelTarget):
            self._sentinel, self._redis = connect(url, timeout)
        else:
            self._redis = _standalone(url, timeout)
        self._ttl = int(ttl_seconds)
        self._max = max_per_conversation
        self._take = self._redis.register_script(TAKE_SLOT)
        self._count = self._redis.register_script(COUNT_SLOTS)
        self._put = self._redis.register_script(PUT)
        self._drop = self._redis.register_script(DROP)
        self._quota = quota or Quota()
        self.usage = Usage()

    @staticmethod
    def _key(team: str, conversation: str) -> str:
        return f"cw:ck:{team}:{conversation}"

    async def candidates(self, team: str, conversation: str) -> list[Checkpoint]:
        values = await self._redis.hvals(self._key(team, conversation))
        return [load(v) for v in values]

    async def put(self, team: str, checkpoint: Checkpoint, owner: str = "") -> None:
        key = self._key(team, checkpoint.conversation)
        body = dump(checkpoint)
        size = charged(key, checkpoint.id, body)
        args: list[bytes | str | int] = [key, checkpoint.id, body, self._ttl * 1000]
        args += [owner or team, size, *self._bounds]
        self._count_evictions(await self._put(args=args))
        existing = [load(v) for v in await self._redis.hvals(key)]
        if len(existing) > self._max:
            oldest = sorted(existing, key=lambda c: c.created_at)[: len(existing) - self._max]
            names = [object_name(key, c.id) for c in oldest]
            self.usage.held = int(await self._drop(args=names))

    @property
    def _bounds(self) -> list[int]:
        return [self._quota.per_owner, self._quota.total]

    def _count_evictions(self, reply: list[int]) -> None:
        by_owner, by_total, held = (int(n) for n in reply)
        self.usage.evicted_owner += by_owner
        self.usage.evicted_total += by_total
        self.usage.held = held

    async def learned_windows(self) -> dict[str, int]:
        raw = await self._redis.hgetall(LEARNED)
        return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}

    async def put_learned_window(self, model: str, window: int) -> None:
        current = await self._redis.hget(LEARNED, model)
        if current is None or int(current) > window:
            await self._redis.hset(LEARNED, model, window)

    async def forget_learned(self, keys: list[str]) -> None:
        """Forget learned windows and settings (an operator's reset)."""
        await self._redis.hdel(LEARNED, *keys)

    async def put_setting(self, key: str, value: int) -> None:
        await self._redis.hset(LEARNED, key, value)

    async def get_blob(self, key: str) -> bytes | None:
        value = await self._redis.get(f"cw:blob:{key}")
        return value.encode() if isinstance(value, str) else value

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        await self.put_blobs([Blob(key, value, ttl_seconds, owner)])

    async def put_blobs(self, items: list[Blob]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:  # one round trip
            for b in items:
                key = f"cw:blob:{b.key}"
                size = -1 if b.owner is None else charged(key, b.value)
                ttl = max(1, int(b.ttl_seconds * 1000))
                args: list[bytes | str | int] = [key, "", b.value, ttl, b.owner or ""]
                args += [size, *self._bounds]
                await self._put(args=args, client=pipe)
            replies = await pipe.execute()
        for reply in replies:
            self._count_evictions(reply)

    async def acquire(self, key: str, ttl_seconds: float) -> bool:
        return bool(
            await self._redis.set(f"cw:lock:{key}", b"1", nx=True, px=int(ttl_seconds * 1000))
        )

    async def release(self, key: str) -> None:
        await self._redis.delete(f"cw:lock:{key}")

    async def renew(self, key: str, ttl_seconds: float) -> None:
        await self._redis.pexpire(f"cw:lock:{key}", max(1, int(ttl_seconds * 1000)))

    async def locked(self, key: str) -> bool:
        return bool(await self._redis.exists(f"cw:lock:{key}"))

    async def take_slot(self, key: str, limit: int, window_seconds: float) -> bool:
        member = secrets.token_hex(8)
        window = str(window_seconds)
        taken = await self._take(keys=[f"cw:slots:{key}"], args=[limit, window, member])
        return bool(taken)

    async def slots_taken(self, key: str, window_seconds: float) -> int:
        return int(await self._count(keys=[f"cw:slots:{key}"], args=[str(window_seconds)]))

    async def ping(self) -> None:
        await self._redis.ping()

    async def scope_secret(self, fresh: bytes | None = None) -> bytes:
        await self._redis.set("cw:scope-secret", fresh or secrets.token_bytes(32), nx=True)
        value = await self._redis.get("cw:scope-secret")
        return value.encode() if isinstance(value, str) else bytes(value or b"")

    async def close(self) -> None:
        await self._redis.aclose()
        if self._sentinel is not None:
            await self._sentinel.aclose()


def _standalone(url: str, timeout: float) -> aioredis.Redis:
    # One retry at once, on a new connection (those of a Redis that restarted are dead), and
    # no backoff: redis-py's own (ten retries, up to a second apart) would keep a command on a
    # dead Redis past the store's timeout (GuardedStore), which bounds every call and rests
    # the store after a fault.
    return aioredis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1, (RedisConnectionError,)),
    )
