#!lua
-- sluice release: gives one concurrency lease back.
--
-- KEYS[1]: the limit key's sorted set of leases ("id:cost" scored by expiry
-- in µs), KEYS[2]: its hash (s: last id, i: permits held).
-- ARGV[1]: the lease's member "id:cost".
-- Reply: {sec, usec, held}: held is 1 when the lease was live and is now
-- released, 0 when it was not held (released already, expired, unknown).

local EPOCH = 1700000000
local time = redis.call('TIME')
local t = (tonumber(time[1]) - EPOCH) * 1000000 + tonumber(time[2])
local key, meta = KEYS[1], KEYS[2]

local i = tonumber(redis.call('HGET', meta, 'i') or '0')
local changed = false
-- Expired leases first: a lease is held until its expiry, exclusive.
local gone = redis.call('ZRANGEBYSCORE', key, '-inf', t)
if #gone > 0 then
  for _, m in ipairs(gone) do
    i = i - tonumber(string.match(m, ':(%d+)$'))
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', t)
  changed = true
end
local held = redis.call('ZREM', key, ARGV[1])
if held == 1 then
  i = i - tonumber(string.match(ARGV[1], ':(%d+)$'))
  changed = true
end
if changed and redis.call('EXISTS', meta) == 1 then
  -- HSET keeps the hash's TTL, set by the acquiring script.
  redis.call('HSET', meta, 'i', math.max(0, i))
end
return {time[1], time[2], held}
