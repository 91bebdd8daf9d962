"""The shared checkpoint store: Redis, for several proxy replicas.

Checkpoints of a conversation live in one hash (``cw:ck:<team>:<conversation>``) that expires
with the TTL and keeps at most ``max_per_conversation`` entries; single-flight locks are
``SET NX PX`` keys, so replicas summarize a conversation once between them.
"""

from __future__ import annotations

import secrets

from redis import asyncio as aioredis

from proxy.stores.codec import dump, load
from strategies.checkpoint import Checkpoint

LEARNED = "cw:learned"


class RedisStore:
    def __init__(self, url: str, ttl_seconds: float, max_per_conversation: int) -> None:
        self._redis = aioredis.from_url(url)
        self._ttl = int(ttl_seconds)
        self._max = max_per_conversation

    @staticmethod
    def _key(team: str, conversation: str) -> str:
        return f"cw:ck:{team}:{conversation}"

    async def candidates(self, team: str, conversation: str) -> list[Checkpoint]:
        values = await self._redis.hvals(self._key(team, conversation))
        return [load(v) for v in values]

    async def put(self, team: str, checkpoint: Checkpoint) -> None:
        key = self._key(team, checkpoint.conversation)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, checkpoint.id, dump(checkpoint))
            pipe.expire(key, self._ttl)
            await pipe.execute()
        existing = [load(v) for v in await self._redis.hvals(key)]
        if len(existing) > self._max:
            oldest = sorted(existing, key=lambda c: c.created_at)[: len(existing) - self._max]
            await self._redis.hdel(key, *[c.id for c in oldest])

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

    async def put_blob(self, key: str, value: bytes, ttl_seconds: float) -> None:
        await self._redis.set(f"cw:blob:{key}", value, px=max(1, int(ttl_seconds * 1000)))

    async def put_blobs(self, items: list[tuple[str, bytes, float]]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:  # one round trip
            for key, value, ttl_seconds in items:
                pipe.set(f"cw:blob:{key}", value, px=max(1, int(ttl_seconds * 1000)))
            await pipe.execute()

    async def acquire(self, key: str, ttl_seconds: float) -> bool:
        return bool(
            await self._redis.set(f"cw:lock:{key}", b"1", nx=True, px=int(ttl_seconds * 1000))
        )

    async def release(self, key: str) -> None:
        await self._redis.delete(f"cw:lock:{key}")

    async def scope_secret(self) -> bytes:
        await self._redis.set("cw:scope-secret", secrets.token_bytes(32), nx=True)
        value = await self._redis.get("cw:scope-secret")
        return value.encode() if isinstance(value, str) else bytes(value or b"")

    async def close(self) -> None:
        await self._redis.aclose()
