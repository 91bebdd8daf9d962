"""The Redis store's bounds (proxy/stores/quota.py): every charged write, its accounting and
its evictions in one script, atomic for every replica.

An object is named by its Redis key and, for a checkpoint, its field in the conversation's
hash (``key \\0 field``; a blob's field is empty). The accounting, beside the objects:

    cw:q:meta          name -> "bytes \\0 owner"
    cw:q:age           name, scored by when it was written (the oldest of anybody's)
    cw:q:age:<owner>   the same, for one owner (its oldest)
    cw:q:exp           name, scored by when it expires (forgotten, and a checkpoint dropped,
                       once past: Redis expires a blob, and a conversation's hash lives as long
                       as its newest checkpoint)
    cw:q:used          owner -> bytes
    cw:q:total         bytes, every owner's

The scripts name keys they are not passed: a standalone Redis (or one primary) holds the store,
as the quota slots' script assumes too.
"""

from __future__ import annotations

FUNCTIONS = r"""
local function forget(name)
  local meta = redis.call('HGET', 'cw:q:meta', name)
  if not meta then return end
  local sep = string.find(meta, '\0', 1, true)
  local size = tonumber(string.sub(meta, 1, sep - 1))
  local owner = string.sub(meta, sep + 1)
  if redis.call('HINCRBY', 'cw:q:used', owner, -size) <= 0 then
    redis.call('HDEL', 'cw:q:used', owner)
  end
  redis.call('DECRBY', 'cw:q:total', size)
  redis.call('HDEL', 'cw:q:meta', name)
  redis.call('ZREM', 'cw:q:age', name)
  redis.call('ZREM', 'cw:q:age:' .. owner, name)
  redis.call('ZREM', 'cw:q:exp', name)
end

local function split(name)
  local at, i = nil, 0
  while true do
    i = string.find(name, '\0', i + 1, true)
    if not i then break end
    at = i
  end
  return string.sub(name, 1, at - 1), string.sub(name, at + 1)
end

local function drop(name)
  local key, field = split(name)
  if field == '' then
    redis.call('DEL', key)
  else
    redis.call('HDEL', key, field)
  end
  forget(name)
end

local function total()
  return tonumber(redis.call('GET', 'cw:q:total') or '0')
end
"""

# ARGV: key, field ('' for a blob), value, ttl in ms, owner, charged bytes (-1: outside the
# limits), the owner's bound, the total's. Returns {evicted for the owner, for the total, bytes}.
PUT = (
    FUNCTIONS
    + r"""
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
for _, name in ipairs(redis.call('ZRANGEBYSCORE', 'cw:q:exp', '-inf', t, 'LIMIT', 0, 64)) do
  local key, field = split(name)
  if field ~= '' then redis.call('HDEL', key, field) end
  forget(name)
end
local key, field, value, ttl, owner = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local size = tonumber(ARGV[6])
local name = key .. '\0' .. field
forget(name)
if field == '' then
  redis.call('SET', key, value, 'PX', ttl)
else
  redis.call('HSET', key, field, value)
  redis.call('PEXPIRE', key, ttl)
end
if size < 0 then return {0, 0, total()} end
redis.call('HSET', 'cw:q:meta', name, size .. '\0' .. owner)
redis.call('ZADD', 'cw:q:age', t, name)
redis.call('ZADD', 'cw:q:age:' .. owner, t, name)
redis.call('ZADD', 'cw:q:exp', t + ttl / 1000, name)
redis.call('HINCRBY', 'cw:q:used', owner, size)
redis.call('INCRBY', 'cw:q:total', size)
local by_owner, by_total = 0, 0
while tonumber(redis.call('HGET', 'cw:q:used', owner) or '0') > tonumber(ARGV[7]) do
  local oldest = redis.call('ZRANGE', 'cw:q:age:' .. owner, 0, 0)
  if #oldest == 0 then break end
  drop(oldest[1])
  by_owner = by_owner + 1
end
while total() > tonumber(ARGV[8]) do
  local oldest = redis.call('ZRANGE', 'cw:q:age', 0, 0)
  if #oldest == 0 then break end
  drop(oldest[1])
  by_total = by_total + 1
end
return {by_owner, by_total, total()}
"""
)

# ARGV: the names of objects to drop (a conversation's checkpoints past its bound).
DROP = (
    FUNCTIONS
    + r"""
for _, name in ipairs(ARGV) do drop(name) end
return total()
"""
)


def object_name(key: str, field: str = "") -> str:
    """An object's name in the accounting: its key, and its field in a hash (a checkpoint)."""
    return f"{key}\0{field}"
