#!lua
-- sluice heartbeat: counts the live instances of one store prefix.
--
-- KEYS[1]: a sorted set of instance ids scored by their last heartbeat (µs).
-- ARGV[1]: this instance's id; ARGV[2]: how long an instance goes on
-- counting after its last heartbeat (µs), unless it leaves; ARGV[3]: 1 to
-- beat, 0 to leave. Reply: {sec, usec, instances counted}.

local EPOCH = 1700000000
local time = redis.call('TIME')
local t = (tonumber(time[1]) - EPOCH) * 1000000 + tonumber(time[2])
local key, live = KEYS[1], tonumber(ARGV[2])
if ARGV[3] == '0' then
  redis.call('ZREM', key, ARGV[1])
  return {time[1], time[2], redis.call('ZCARD', key)}
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', t - live)
redis.call('ZADD', key, t, ARGV[1])
redis.call('PEXPIRE', key, math.ceil(2 * live / 1000) + 1)
return {time[1], time[2], redis.call('ZCARD', key)}
