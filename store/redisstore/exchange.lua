#!lua
-- sluice regions exchange: each region's usage of one limit's key in its
-- latest window, for package regions.
--
-- KEYS[i]: one hash per limit and key: field w, the window index; fields
-- r:<region>, each region's count in that window. ARGV[1]: 'p' to publish,
-- 'o' to read the others' sums; ARGV[2]: the region. Then per key: the
-- window, and for 'p' its count and the hash's TTL (ms).
-- Reply: 'p' {the number of keys written}; 'o' per key the other regions'
-- sum.

local mode, region = ARGV[1], 'r:' .. ARGV[2]
if mode == 'p' then
  local written = 0
  for i, key in ipairs(KEYS) do
    local a = 3 + (i - 1) * 3
    local window, used, ttl = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local w = tonumber(redis.call('HGET', key, 'w') or '-1')
    if window > w then
      redis.call('DEL', key)
      redis.call('HSET', key, 'w', window)
      w = window
    end
    if window == w then
      local old = tonumber(redis.call('HGET', key, region) or '0')
      if used > old then
        redis.call('HSET', key, region, used)
      end
      redis.call('PEXPIRE', key, ttl)
      written = written + 1
    end
  end
  return {written}
end
local out = {}
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[2 + i])
  local sum = 0
  local h = redis.call('HGETALL', key)
  local w = -1
  for j = 1, #h, 2 do
    if h[j] == 'w' then
      w = tonumber(h[j + 1])
    end
  end
  if w == window then
    for j = 1, #h, 2 do
      local f = h[j]
      if f ~= 'w' and f ~= region then
        sum = sum + tonumber(h[j + 1])
      end
    end
  end
  out[i] = sum
end
return out
