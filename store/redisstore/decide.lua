#!lua
-- sluice decide: charges every hit of one request, all or nothing.
--
-- Declared without allow-oom: Redis 7 refuses the whole script up front when
-- it is over maxmemory, so a full server never applies half a request.
--
-- KEYS: two per hit, KEYS[2i-1] is the hit's state; KEYS[2i] is the lease
-- metadata of a concurrency hit (the sliding log's and the rate limits'
-- scripts repeat the first key there).
-- ARGV[1]: the number of hits (negative: a refund of that many, see
-- refund below); then seven values per hit:
--   algorithm (1 token bucket, 2 fixed window, 3 sliding window,
--   4 sliding log, 5 concurrency), cost, limit, parameter, shift, months,
--   wait. The parameter is the emission interval in ns (token bucket), the
--   window in µs (windows) or the lease TTL in µs (concurrency). Shift (µs)
--   and months place the windows of the fixed and sliding windows on their
--   calendar, as store.WindowClock does (0 and 0 for the others; in a
--   token bucket's refund the shift is its admission's reset_after, ns). Wait is
--   the hit's max wait in ns when deciding (0: none; token buckets and
--   fixed windows of a fixed length only), and in a refund what its
--   reservation left: a bucket's state "u:r" or a fixed window's index
--   ("-" for an admission at once). After the hits: the request's wait in
--   ns (store.Request.Wait), and in a refund the admitting decision's
--   instant in Unix µs (store.Result.Now, this script's TIME then).
--
-- Time: t is the server's TIME in µs since 2023-11-14 (an integer below
-- 2^53 for 285 years, so exact in Lua's doubles, with room for the lease
-- ids of 16·t). The token bucket keeps its theoretical arrival time as µs
-- and a ns remainder and computes in ns relative to t, exact for spans
-- below 2^53 ns (104 days). The windows run on a window clock derived from
-- the Unix time tu, so that they start where store.Calendar says.
--
-- Reply: {sec, usec, evaluated, then per evaluated hit: allowed, reason,
-- remaining, retry_after, reset_after, lease_id}. Durations are ns for the
-- token bucket and µs otherwise; retry_after -1 is "never". A token bucket
-- or fixed window hit admitted with a wait (a reservation) has its wait as
-- retry_after and what it left as lease_id (a bucket's state "u:r", a fixed
-- window's index).
-- Nothing is written unless every hit is admitted.

local time = redis.call('TIME')
local EPOCH = 1700000000
local t = (tonumber(time[1]) - EPOCH) * 1000000 + tonumber(time[2])
-- tu is the Unix time in µs, on which windows are placed (below 2^53 until
-- the year 2255).
local tu = tonumber(time[1]) * 1000000 + tonumber(time[2])
local n = tonumber(ARGV[1])
-- A negative count asks for a refund of -n hits (store.Refunder): what an
-- admitted decision charged is given back, and nothing is decided.
local refunding = n < 0
if refunding then n = -n end

-- idiv is floor(a/b) for integers, corrected for the rounding of the
-- division in doubles.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function ceildiv(a, b)
  local q = idiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

-- states read in this call, by key, so that two hits on one key see each
-- other's charges; committed only when every hit is admitted.
local cache = {}
local out = {time[1], time[2], 0}
local commits = {}

-- wait is the latest slot a hit of this request reserved, in ns after t:
-- the hits after it ask for no earlier one (store.Hit.MaxWait). It starts
-- at the request's own wait (store.Request.Wait), the last argument.
local wait = tonumber(ARGV[2 + 7 * math.abs(tonumber(ARGV[1]))]) or 0

-- stateOf formats a token bucket state of debt ns after t.
local function stateOf(debt)
  local us = idiv(debt, 1000)
  return string.format('%.0f:%.0f', t + us, debt - us * 1000)
end

-- Token bucket (GCRA). State: a string "u:r", the theoretical arrival
-- time in µs and its ns remainder. maxwait > 0 lets a hit that does not fit
-- now reserve the first instant, from wait on, at which it fits, if that
-- comes within maxwait (concurrency.GCRA.ReserveN).
local function gcra(key, cost, limit, interval, maxwait)
  local st = cache[key]
  if not st then
    local v = redis.call('GET', key)
    st = {debt = 0}
    if v then
      local u, r = string.match(v, '^(%d+):(%d+)$')
      st.debt = math.max(0, (tonumber(u) - t) * 1000 + tonumber(r))
    end
    cache[key] = st
  end
  local tau = limit * interval
  local function view(debt)
    return idiv(math.max(0, tau - debt), interval), debt
  end
  if cost == 0 then
    local rem, reset = view(st.debt)
    return 1, 0, rem, 0, reset, 0
  end
  if cost > limit then
    local rem, reset = view(st.debt)
    return 0, 2, rem, -1, reset, 0
  end
  local nxt = st.debt + cost * interval
  if maxwait > 0 or wait > 0 then
    maxwait = math.max(maxwait, wait) -- exactly at wait when shorter
    -- The first instant from wait on at which the hit fits: its slot.
    local resv = math.max(st.debt, wait) + cost * interval
    local at = math.max(wait, resv - tau)
    if at <= maxwait then
      st.debt = resv
      commits[key] = function()
        redis.call('SET', key, stateOf(st.debt), 'PX', ceildiv(2 * st.debt, 1000000) + 1)
      end
      local rem = view(resv)
      if at > 0 then
        wait = at
        return 1, 0, rem, at, resv, stateOf(resv)
      end
      return 1, 0, rem, 0, resv, 0
    end
    -- Beyond maxwait (so the debt is at least wait, and resv is nxt): the
    -- wait until it fits at once.
    local rem, reset = view(st.debt)
    return 0, 1, rem, nxt - tau, reset, 0
  end
  if nxt - tau > 0 then
    local rem, reset = view(st.debt)
    return 0, 1, rem, nxt - tau, reset, 0
  end
  st.debt = nxt
  commits[key] = function()
    redis.call('SET', key, stateOf(st.debt), 'PX', ceildiv(2 * st.debt, 1000000) + 1)
  end
  local rem = view(nxt)
  return 1, 0, rem, 0, nxt, 0
end

-- The window clock of a calendar (store.WindowClock): windows of length w
-- start at its multiples. For a fixed length it is t shifted; for calendar
-- months each window of months months spans w (months·31 days) on it.
local DAY = 86400000000

-- firstOfMonth returns the day number (since 1970-01-01) of the first of
-- month m (0-11) of year y, and civil the year and month (1-12) of day d:
-- the proleptic Gregorian calendar counted in 400-year eras of 146097 days,
-- with years starting in March so that a leap day comes last.
local function firstOfMonth(y, m)
  if m < 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 10) % 12 -- months since March
  local doy = math.floor((153 * mp + 2) / 5)
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

local function civil(d)
  local z = d + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = (mp + 2) % 12 + 1
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

-- monthStart is µs at 00:00 on the first of month m counted from January
-- 1970 (0).
local function monthStart(m)
  local y = math.floor(m / 12)
  return firstOfMonth(1970 + y, m - y * 12) * DAY
end

-- windowClock is the Unix time at (µs) on the window clock of shift,
-- months and w.
local function windowClock(at, shift, months, w)
  if months == 0 then return at + shift end
  local lt = at + shift
  local y, m = civil(math.floor(lt / DAY))
  local p = math.floor(((y - 1970) * 12 + m - 1) / months)
  local start, stop = monthStart(p * months), monthStart((p + 1) * months)
  return (p + 1) * w + math.floor((lt - start) / (stop - start) * w)
end

-- realWait turns a wait d from tw on the window clock into µs from t,
-- rounded up and one µs long (the doubles round a month's fraction).
local function realWait(tw, d, shift, months, w)
  if months == 0 or d <= 0 then return d end
  local at = tw + d
  local p = math.floor(at / w) - 1
  local frac = at - (p + 1) * w
  local start, stop = monthStart(p * months), monthStart((p + 1) * months)
  local real = start - shift
  if frac > 0 then real = real + math.ceil(frac / w * (stop - start)) + 1 end
  return math.max(1, real - tu)
end

-- Fixed window. State: hash i (window index) and c (count). t is the
-- window clock's time. maxwait > 0 (ns) lets a hit that does not fit
-- reserve the start of a later window, from wait on, within maxwait
-- (concurrency.FixedWindow.ReserveN); the calendar is then of a fixed
-- length, so waits on the window clock are real ones.
local function fixed(key, cost, limit, w, t, maxwait)
  local st = cache[key]
  if not st then
    local v = redis.call('HMGET', key, 'i', 'c')
    st = {i = tonumber(v[1]) or 0, c = tonumber(v[2]) or 0}
    cache[key] = st
  end
  local cur = idiv(t, w)
  local idx, cnt, back = st.i, st.c, false
  if cur > idx then idx, cnt = cur, 0 elseif cur < idx then back = true end
  local function decision(c)
    local rem, reset = 0, 0
    if not back then rem = math.max(0, limit - c) end -- c > limit after a lowered Update
    if c > 0 then reset = (idx + 1) * w - t elseif back then reset = idx * w - t end
    return rem, reset
  end
  if maxwait >= 0 and (maxwait > 0 or wait > 0) and cost > 0 and cost <= limit then
    maxwait = math.max(maxwait, wait) -- exactly at wait when shorter
    local from = t + ceildiv(wait, 1000)
    local first, i, c = idiv(from, w), st.i, st.c
    local at = from
    if i < first then i, c = first, 0 elseif i > first then at = i * w end
    if c + cost > limit then i, c, at = i + 1, 0, (i + 1) * w end
    if (at - t) * 1000 <= maxwait then
      st.i, st.c = i, c + cost
      commits[key] = function()
        redis.call('HSET', key, 'i', st.i, 'c', st.c)
        redis.call('PEXPIRE', key, ceildiv((st.i + 2) * w - t, 1000) + 1)
      end
      idx, cnt, back = st.i, st.c, st.i > cur
      local rem, reset = decision(cnt)
      if at > t then
        wait = math.max(wait, (at - t) * 1000)
        return 1, 0, rem, at - t, reset, st.i
      end
      return 1, 0, rem, 0, reset, 0
    end
  end
  if cost > 0 and (cost > limit or back or cnt + cost > limit) then
    local rem, reset = decision(cnt)
    if cost > limit then return 0, 2, rem, -1, reset, 0 end
    local retry = (idx + 1) * w - t
    if back and cnt + cost <= limit then retry = idx * w - t end
    return 0, 1, rem, retry, reset, 0
  end
  if cost > 0 then
    cnt = cnt + cost
    st.i, st.c = idx, cnt
    commits[key] = function()
      redis.call('HSET', key, 'i', st.i, 'c', st.c)
      redis.call('PEXPIRE', key, ceildiv(2 * w, 1000) + 1)
    end
  end
  local rem, reset = decision(cnt)
  return 1, 0, rem, 0, reset, 0
end

-- Sliding window counter. State: hash i (window index), c (current count),
-- p (previous count). t is the window clock's time.
local function sliding(key, cost, limit, w, t)
  local st = cache[key]
  if not st then
    local v = redis.call('HMGET', key, 'i', 'c', 'p')
    st = {i = tonumber(v[1]) or 0, c = tonumber(v[2]) or 0, p = tonumber(v[3]) or 0}
    cache[key] = st
  end
  local idx, cur, prev, back, e = st.i, st.c, st.p, false, 0
  local nowIdx = idiv(t, w)
  if nowIdx < idx then
    back = true
  else
    if nowIdx == idx + 1 then
      idx, cur, prev = nowIdx, 0, cur
    elseif nowIdx > idx + 1 then
      idx, cur, prev = nowIdx, 0, 0
    end
    e = t - idx * w
  end
  local function weighted(p)
    if p == 0 then return 0 end
    return ceildiv(p * (w - e), w)
  end
  local function share(r, p)
    if r >= p then return w end
    return idiv(r * w, p)
  end
  local function decision(c)
    local rem, reset = 0, 0
    if not back then rem = math.max(0, limit - c - weighted(prev)) end
    if c > 0 then reset = (idx + 2) * w - t
    elseif prev > 0 then reset = (idx + 1) * w - t
    elseif back then reset = idx * w - t end
    return rem, reset
  end
  if cost > 0 and (cost > limit or back or cur + cost + weighted(prev) > limit) then
    local rem, reset = decision(cur)
    if cost > limit then return 0, 2, rem, -1, reset, 0 end
    -- The earliest instant at which cost fits, as concurrency.SlidingWindow.
    local at
    local r = limit - cur - cost
    if r >= 0 then
      local x = math.max(e, w - share(r, prev))
      if x < w then at = idx * w + x end
    end
    if not at then
      local x = w - share(limit - cost, cur)
      if x < w then at = (idx + 1) * w + math.max(0, x) else at = (idx + 2) * w end
    end
    return 0, 1, rem, at - t, reset, 0
  end
  if cost > 0 then
    cur = cur + cost
    st.i, st.c, st.p = idx, cur, prev
    commits[key] = function()
      redis.call('HSET', key, 'i', st.i, 'c', st.c, 'p', st.p)
      redis.call('PEXPIRE', key, ceildiv(3 * w, 1000) + 1)
    end
  end
  local rem, reset = decision(cur)
  return 1, 0, rem, 0, reset, 0
end

-- Sliding log. State: a list of admission times (µs), newest first, at most
-- limit long.
local function slog(key, cost, limit, w)
  local st = cache[key]
  if not st then
    st = {ts = redis.call('LRANGE', key, 0, limit - 1), pushed = 0}
    for i = 1, #st.ts do st.ts[i] = tonumber(st.ts[i]) end
    cache[key] = st
  end
  local ts = st.ts
  local function decision()
    -- Oldest first: unused slots and the expired entries older than the
    -- oldest live one count as remaining (as concurrency.SlidingLog).
    local rem = math.max(0, limit - #ts)
    local counting, resetAt = true, 0
    for i = math.min(#ts, limit), 1, -1 do
      local at = ts[i] + w
      if at > t then
        counting = false
        resetAt = math.max(resetAt, at)
      elseif counting then
        rem = rem + 1
      end
    end
    local reset = 0
    if resetAt > t then reset = resetAt - t end
    return rem, reset
  end
  if cost == 0 then
    local rem, reset = decision()
    return 1, 0, rem, 0, reset, 0
  end
  if cost > limit then
    local rem, reset = decision()
    return 0, 2, rem, -1, reset, 0
  end
  -- Admitting cost needs the entries at positions limit-cost+1..limit
  -- (newest first) to have left the window.
  local blocked = 0
  for i = limit - cost + 1, math.min(#ts, limit) do
    blocked = math.max(blocked, ts[i] + w)
  end
  if blocked > t then
    local rem, reset = decision()
    return 0, 1, rem, blocked - t, reset, 0
  end
  for _ = 1, cost do table.insert(ts, 1, t) end
  while #ts > limit do table.remove(ts) end
  st.pushed = st.pushed + cost
  commits[key] = function()
    local left = st.pushed
    while left > 0 do
      local k = math.min(left, 1000)
      local args = {}
      for i = 1, k do args[i] = t end
      redis.call('LPUSH', key, unpack(args))
      left = left - k
    end
    redis.call('LTRIM', key, 0, limit - 1)
    redis.call('PEXPIRE', key, ceildiv(2 * w, 1000) + 1)
  end
  local rem, reset = decision()
  return 1, 0, rem, 0, reset, 0
end

-- Concurrency leases. State: a sorted set of "id:cost" scored by expiry
-- (µs) and a hash s (the last lease id) and i (permits held).
local function leases(key, meta, cost, limit, ttl)
  local st = cache[key]
  if not st then
    local i = tonumber(redis.call('HGET', meta, 'i') or '0')
    -- Purge expired leases first; a purge changes nothing a caller sees,
    -- so it needs no all-or-nothing.
    local gone = redis.call('ZRANGEBYSCORE', key, '-inf', t)
    if #gone > 0 then
      for _, m in ipairs(gone) do
        i = i - tonumber(string.match(m, ':(%d+)$'))
      end
      redis.call('ZREMRANGEBYSCORE', key, '-inf', t)
      if redis.call('EXISTS', meta) == 1 then
        -- HSET keeps the hash's TTL, set when a lease was taken.
        redis.call('HSET', meta, 'i', i)
      end
    end
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    st = {i = i, last = tonumber(last[2]) or 0, new = {}}
    cache[key] = st
  end
  local function decision()
    local reset = 0
    if st.last > t then reset = st.last - t end
    return math.max(0, limit - st.i), reset
  end
  if cost == 0 then
    local rem, reset = decision()
    return 1, 0, rem, 0, reset, 0
  end
  if cost > limit then
    local rem, reset = decision()
    return 0, 2, rem, -1, reset, 0
  end
  if st.i + cost > limit then
    local rem, reset = decision()
    -- Wait until enough live leases expire, walking them in expiry order
    -- (leases taken earlier in this call expire last: same TTL, same t).
    local free = limit - st.i
    local held = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    local retry = -1
    for j = 1, #held, 2 do
      free = free + tonumber(string.match(held[j], ':(%d+)$'))
      if free >= cost then
        retry = math.max(1, tonumber(held[j + 1]) - t)
        break
      end
    end
    if retry < 0 then retry = ttl end
    return 0, 1, rem, retry, reset, 0
  end
  if not st.seq then
    -- Lease ids start from 16·t when a key's state is made anew, so an id
    -- of an expired state is never reused unless that state issued more
    -- than 16 leases per µs of its life.
    st.seq = tonumber(redis.call('HGET', meta, 's') or '0')
    if st.seq == 0 then st.seq = 16 * t end
  end
  st.seq = st.seq + 1
  st.i = st.i + cost
  st.last = math.max(st.last, t + ttl)
  table.insert(st.new, string.format('%.0f:%.0f', st.seq, cost))
  commits[key] = function()
    local args = {}
    for j, m in ipairs(st.new) do
      args[2 * j - 1] = t + ttl
      args[2 * j] = m
    end
    redis.call('ZADD', key, unpack(args))
    redis.call('HSET', meta, 's', st.seq, 'i', st.i)
    local ms = ceildiv(2 * (st.last - t), 1000) + 1
    redis.call('PEXPIRE', key, ms)
    redis.call('PEXPIRE', meta, ms)
  end
  local rem, reset = decision()
  return 1, 0, rem, 0, reset, st.seq
end

-- refund gives back cost on the state of one hit of an admitted decision:
-- a bucket's as of now (t), at most what ta (ns) says is left of it, a window's in the window that counted it, the
-- one of ta (the admission's instant on the window clock), a log's entries
-- made at ta (the admission's instant on t's clock) or before, and a
-- reservation still pending (a fixed window's) as of now (tw). Writes keep
-- each key's TTL.
local function refund(alg, key, cost, p, tw, ta, limit, reserved)
  if alg == 1 then -- token bucket: the debt, in ns, shrinks
    local v = redis.call('GET', key)
    if not v then return end
    local u, r = string.match(v, '^(%d+):(%d+)$')
    local debt = (tonumber(u) - t) * 1000 + tonumber(r)
    if reserved ~= '-' then
      -- A reservation (concurrency.GCRA.Cancel): undone only while the
      -- state is as it left it, else its slot stays unused.
      if v ~= reserved then return end
    elseif debt > limit * p then
      return -- reservations pending: nothing comes back (GCRA.Refund)
    else
      -- Only what the tokens still weigh now (GCRA.RefundLate): ta is
      -- what of them the bucket had not refilled by now, in ns.
      local back = math.min(math.min(cost, limit) * p, ta)
      if back <= 0 then return end
      debt = math.max(0, debt - back)
      redis.call('SET', key, stateOf(debt), 'KEEPTTL')
      return
    end
    debt = math.max(0, debt - math.min(cost, limit) * p)
    redis.call('SET', key, stateOf(debt), 'KEEPTTL')
  elseif alg == 2 or alg == 3 then -- windows: the count of the window that counted it
    local v = redis.call('HMGET', key, 'i', 'c', 'p')
    local i, c, pc = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]) or 0
    if not i then return end
    if alg == 2 and reserved ~= '-' then
      -- A reservation (concurrency.FixedWindow.Cancel): undone while the
      -- state counts its window; a window not begun that it leaves empty
      -- goes back to the one before, counted full.
      local r = tonumber(reserved)
      if i ~= r or c == 0 then return end
      if c <= cost and idiv(tw, p) < i then
        redis.call('HSET', key, 'i', i - 1, 'c', limit)
      else
        redis.call('HSET', key, 'c', math.max(0, c - cost))
      end
      return
    end
    -- As concurrency.FixedWindow.Refund and SlidingWindow.Refund: the
    -- count of the admission's window, while the state holds it (a sliding
    -- window's as its previous count too); a later window's never.
    local at = idiv(ta, p)
    if i == at and c > 0 then
      redis.call('HSET', key, 'c', math.max(0, c - cost))
    elseif alg == 3 and i == at + 1 and pc > 0 then
      redis.call('HSET', key, 'p', math.max(0, pc - cost))
    end
  elseif alg == 4 then
    -- Sliding log: the latest entries made at the admission's instant or
    -- before (ta, on the log's clock) that still count, as
    -- concurrency.SlidingLog.Refund: never an admission made since, whose
    -- slot a late refund (a rule that counts only failures) would free.
    -- Marked, then removed in one LREM, which keeps the TTL.
    local ts = redis.call('LRANGE', key, 0, -1)
    local marked = 0
    for j = 1, #ts do
      if marked == cost then break end
      local at = tonumber(ts[j])
      if at <= ta and at + p > t then
        redis.call('LSET', key, j - 1, '-')
        marked = marked + 1
      end
    end
    if marked > 0 then redis.call('LREM', key, 0, '-') end
  end
end

if refunding then
  local admitted = tonumber(ARGV[3 + 7 * n])
  for h = 1, n do
    local b = 1 + (h - 1) * 7
    local alg, cost, p = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 4])
    if cost > 0 and alg ~= 5 then
      local tw, ta = t, t
      if alg == 1 then
        -- Until its admission's instant plus its reset_after (the shift
        -- value of a bucket's refund), the bucket owed its tokens: ta is
        -- what of that is left now, in ns.
        ta = (admitted - tu) * 1000 + tonumber(ARGV[b + 5])
      elseif alg == 4 then
        ta = admitted - EPOCH * 1000000 -- the log's clock
      elseif alg == 2 or alg == 3 then
        local shift, months = tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
        tw, ta = windowClock(tu, shift, months, p), windowClock(admitted, shift, months, p)
      end
      refund(alg, KEYS[2 * h - 1], cost, p, tw, ta, tonumber(ARGV[b + 3]), ARGV[b + 7])
    end
  end
  return out
end

local all = true
for h = 1, n do
  local b = 1 + (h - 1) * 7
  local alg = tonumber(ARGV[b + 1])
  local cost = tonumber(ARGV[b + 2])
  local limit = tonumber(ARGV[b + 3])
  local p = tonumber(ARGV[b + 4])
  local key = KEYS[2 * h - 1]
  local ok, reason, rem, retry, reset, id
  if alg == 1 then
    ok, reason, rem, retry, reset, id = gcra(key, cost, limit, p, tonumber(ARGV[b + 7]))
  elseif alg == 2 or alg == 3 then
    local shift, months = tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
    local tw = windowClock(tu, shift, months, p)
    if alg == 2 then
      local mw = tonumber(ARGV[b + 7])
      if months > 0 then mw = -1 end -- calendar months do not reserve
      ok, reason, rem, retry, reset, id = fixed(key, cost, limit, p, tw, mw)
    else
      ok, reason, rem, retry, reset, id = sliding(key, cost, limit, p, tw)
    end
    retry, reset = realWait(tw, retry, shift, months, p), realWait(tw, reset, shift, months, p)
  elseif alg == 4 then
    ok, reason, rem, retry, reset, id = slog(key, cost, limit, p)
  else
    ok, reason, rem, retry, reset, id = leases(key, KEYS[2 * h], cost, limit, p)
  end
  out[3] = h
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = ok, reason, rem, retry, reset, id
  if ok == 0 then
    all = false
    break
  end
end

if all then
  for _, commit in pairs(commits) do commit() end
end
return out
