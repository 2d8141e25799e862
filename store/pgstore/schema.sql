-- sluice pgstore schema. @schema@ is replaced by the store's quoted schema
-- name. Every statement is idempotent, so Migrate may run again (and on
-- several instances at once: it holds a transaction-scoped advisory lock).
--
-- Time is nanoseconds since the Unix epoch (bigint), read once per decision
-- from clock_timestamp() at its microsecond resolution.

CREATE SCHEMA IF NOT EXISTS @schema@;

-- state holds one row per (limit name, algorithm kind, key) that has been
-- charged: kind 1 is a token bucket (a: the theoretical arrival time, b: 0),
-- kind 2 a fixed window (a: the window index on the window clock, b: its
-- count), kind 3 a sliding window (a: the window index, b: its count, c:
-- the previous window's count). expires is the instant from which the row
-- is indistinguishable from no row (a full bucket, windows that have
-- passed).
CREATE TABLE IF NOT EXISTS @schema@.state (
  name    text     NOT NULL,
  kind    smallint NOT NULL,
  key     bytea    NOT NULL, -- any bytes, as a store.Hit's Key
  a       bigint   NOT NULL,
  b       bigint   NOT NULL,
  c       bigint   NOT NULL DEFAULT 0,
  expires bigint   NOT NULL,
  PRIMARY KEY (name, kind, key)
);
CREATE INDEX IF NOT EXISTS state_expires ON @schema@.state (expires);

-- month_start is 00:00 UTC on the first of month m counted from January
-- 1970 (0; -1 is December 1969), in Unix ns.
CREATE OR REPLACE FUNCTION @schema@.month_start(m bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT AS $f$
  SELECT (extract(epoch FROM timestamp '1970-01-01' + make_interval(months => m::int)) * 1000000000)::bigint
$f$;

-- window_at is store.WindowClock.At: now (Unix ns) on the window clock of
-- shift (ns), months per window (0: windows of a fixed length) and span (ns).
CREATE OR REPLACE FUNCTION @schema@.window_at(now bigint, shift bigint, months int, span bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT AS $f$
DECLARE
  lt bigint := now + shift;
  d date;
  m bigint;
  p bigint;
  s bigint;
  e bigint;
BEGIN
  IF months = 0 THEN
    RETURN lt;
  END IF;
  -- lt is positive for any time after 1970-01-01 14:00 UTC: the integer
  -- division is a floor.
  d := date '1970-01-01' + (lt / 86400000000000)::int;
  m := (extract(year FROM d)::bigint - 1970) * 12 + extract(month FROM d)::bigint - 1;
  p := floor(m::numeric / months)::bigint;
  s := @schema@.month_start(p * months);
  e := @schema@.month_start((p + 1) * months);
  RETURN (p + 1) * span + div((lt - s)::numeric * span, e - s)::bigint;
END
$f$;

-- real_at is store.WindowClock.Real: the earliest Unix ns at which the
-- window clock reads at least at (rounded up).
CREATE OR REPLACE FUNCTION @schema@.real_at(at bigint, shift bigint, months int, span bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT AS $f$
DECLARE
  p bigint;
  frac bigint;
  s bigint;
  e bigint;
BEGIN
  IF months = 0 THEN
    RETURN at - shift;
  END IF;
  p := at / span - 1;
  frac := at % span;
  s := @schema@.month_start(p * months);
  e := @schema@.month_start((p + 1) * months);
  RETURN s + div(frac::numeric * (e - s) + span - 1, span)::bigint - shift;
END
$f$;

-- decide charges every hit of one request, all or nothing, at one instant
-- (clock_timestamp(), read once). Hit i is cost costs[i] of the limit
-- names[i] (kind kinds[i]: 1 token bucket, 2 fixed window, 3 sliding
-- window) for keys[i], with limit limits[i] and parameter params[i] (the
-- emission interval in ns of a bucket, the span in ns of a window on its window clock, placed by
-- shifts[i] and months[i]). wait_ms bounds each wait for a lock
-- (lock_timeout, for this transaction only): the caller's deadline, so that a
-- decision the caller gave up on is rolled back by the database too instead
-- of committing later.
--
-- Every distinct state is locked first, in the order of its lock number,
-- with a transaction-scoped advisory lock: that serializes deciders of one
-- key whether or not its row exists yet (a row lock cannot lock a row that
-- is not there), and a fixed order means two decisions never deadlock. The
-- rows read are also locked FOR UPDATE, so that Cleanup (SKIP LOCKED)
-- passes them by. Nothing is written unless every hit is admitted. A
-- request of costs 0 only (a read-out) locks nothing.
--
-- Reply: {now, evaluated, then per evaluated hit: allowed, reason,
-- remaining, retry_after, reset_after}; reason 1 is limited, 2 exceeds
-- capacity (retry_after -1: never); waits are ns from now.
CREATE OR REPLACE FUNCTION @schema@.decide(
  names text[], kinds smallint[], keys bytea[], costs bigint[],
  limits bigint[], params bigint[], shifts bigint[], months int[], wait_ms int) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
  now bigint := (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint;
  n int := cardinality(names);
  out bigint[] := ARRAY[now, 0];
  sa bigint[] := '{}';  -- the state after hit i: a
  sb bigint[] := '{}';  -- and b
  sc bigint[] := '{}';  -- and c
  sx bigint[] := '{}';  -- its expiry
  charged boolean[] := '{}';
  lock bigint;
  charging boolean;
  a bigint;
  b bigint;
  c bigint;
  e bigint;
  x bigint;
  r bigint;
  w_at bigint;
  found_it boolean;
  cost bigint;
  lim bigint;
  par bigint;
  tau bigint;
  debt bigint;
  tw bigint;
  cur bigint;
  back boolean;
  ok bigint;
  reason bigint;
  rem bigint;
  retry bigint;
  reset bigint;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RAISE EXCEPTION 'pgstore: a decision needs hits';
  END IF;
  -- A read-out (every cost 0) writes nothing, so it locks nothing: it
  -- never waits on a decision, nor makes one wait.
  charging := EXISTS (SELECT 1 FROM unnest(costs) AS u(cst) WHERE u.cst > 0);
  IF charging THEN
    PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    FOR lock IN
      SELECT DISTINCT hashtextextended(length(u.nm) || ':' || u.nm || ':' || u.kd || ':' || encode(u.ky, 'hex'), 0)
      FROM unnest(names, kinds, keys) AS u(nm, kd, ky) ORDER BY 1
    LOOP
      PERFORM pg_advisory_xact_lock(lock);
    END LOOP;
  END IF;

  FOR i IN 1..n LOOP
    cost := costs[i];
    lim := limits[i];
    par := params[i];
    -- Two hits on one state see each other's charges.
    found_it := false;
    FOR j IN REVERSE i - 1..1 LOOP
      IF names[j] = names[i] AND kinds[j] = kinds[i] AND keys[j] = keys[i] THEN
        a := sa[j];
        b := sb[j];
        c := sc[j];
        found_it := true;
        EXIT;
      END IF;
    END LOOP;
    IF NOT found_it THEN
      IF charging THEN
        SELECT st.a, st.b, st.c INTO a, b, c FROM @schema@.state st
          WHERE st.name = names[i] AND st.kind = kinds[i] AND st.key = keys[i] FOR UPDATE;
      ELSE
        SELECT st.a, st.b, st.c INTO a, b, c FROM @schema@.state st
          WHERE st.name = names[i] AND st.kind = kinds[i] AND st.key = keys[i];
      END IF;
      IF NOT FOUND THEN
        a := 0;
        b := 0;
        c := 0;
      END IF;
    END IF;
    charged[i] := false;
    ok := 1; reason := 0; retry := 0;

    IF kinds[i] = 1 THEN
      -- Token bucket (concurrency.GCRA): a is the theoretical arrival time.
      tau := lim * par;
      debt := greatest(0, a - now);
      rem := greatest(0, tau - debt) / par;
      reset := debt;
      IF cost > lim THEN
        ok := 0; reason := 2; retry := -1;
      ELSIF cost > 0 THEN
        IF debt + cost * par > tau THEN
          ok := 0; reason := 1; retry := debt + cost * par - tau;
        ELSE
          debt := debt + cost * par;
          a := now + debt;
          rem := (tau - debt) / par;
          reset := debt;
          charged[i] := true;
        END IF;
      END IF;
    ELSIF kinds[i] = 2 THEN
      -- Fixed window (concurrency.FixedWindow) on the window clock: a is
      -- the window index, b the count.
      tw := @schema@.window_at(now, shifts[i], months[i], par);
      cur := tw / par;
      back := false;
      IF cur > a THEN
        a := cur;
        b := 0;
      ELSIF cur < a THEN
        back := true;
      END IF;
      rem := CASE WHEN back THEN 0 ELSE greatest(0, lim - b) END;
      reset := CASE WHEN b > 0 THEN (a + 1) * par - tw WHEN back THEN a * par - tw ELSE 0 END;
      IF cost > lim THEN
        ok := 0; reason := 2; retry := -1;
      ELSIF cost > 0 AND (back OR b + cost > lim) THEN
        ok := 0; reason := 1;
        retry := CASE WHEN back AND b + cost <= lim THEN a * par - tw ELSE (a + 1) * par - tw END;
      ELSIF cost > 0 THEN
        b := b + cost;
        rem := greatest(0, lim - b);
        reset := (a + 1) * par - tw;
        charged[i] := true;
      END IF;
    ELSE
      -- Sliding window counter (concurrency.SlidingWindow) on the window
      -- clock: a is the window index, b its count, c the previous
      -- window's count, weighted by the part of it still inside the
      -- sliding window. Products of a count and a span are numeric: they
      -- may pass 2^63.
      tw := @schema@.window_at(now, shifts[i], months[i], par);
      cur := tw / par;
      back := false;
      e := 0;
      IF cur < a THEN
        back := true;
      ELSE
        IF cur = a + 1 THEN
          c := b;
          a := cur;
          b := 0;
        ELSIF cur > a + 1 THEN
          a := cur;
          b := 0;
          c := 0;
        END IF;
        e := tw - a * par;
      END IF;
      -- w_at is the previous window's weighted count.
      w_at := CASE WHEN c = 0 THEN 0 ELSE div(c::numeric * (par - e) + par - 1, par)::bigint END;
      rem := CASE WHEN back THEN 0 ELSE greatest(0, lim - b - w_at) END;
      reset := CASE WHEN b > 0 THEN (a + 2) * par - tw WHEN c > 0 THEN (a + 1) * par - tw
        WHEN back THEN a * par - tw ELSE 0 END;
      IF cost > lim THEN
        ok := 0; reason := 2; retry := -1;
      ELSIF cost > 0 AND (back OR b + cost + w_at > lim) THEN
        ok := 0; reason := 1;
        -- The earliest instant at which cost fits: within this window once
        -- enough of the previous one has slid out, else in the next.
        retry := NULL;
        r := lim - b - cost;
        IF r >= 0 THEN
          x := greatest(e, par - CASE WHEN r >= c THEN par ELSE div(r::numeric * par, c)::bigint END);
          IF x < par THEN
            retry := a * par + x - tw;
          END IF;
        END IF;
        IF retry IS NULL THEN
          x := par - CASE WHEN lim - cost >= b THEN par ELSE div((lim - cost)::numeric * par, b)::bigint END;
          IF x < par THEN
            retry := (a + 1) * par + greatest(0, x) - tw;
          ELSE
            retry := (a + 2) * par - tw;
          END IF;
        END IF;
      ELSIF cost > 0 THEN
        b := b + cost;
        rem := greatest(0, lim - b - w_at);
        reset := (a + 2) * par - tw;
        charged[i] := true;
      END IF;
    END IF;
    IF kinds[i] > 1 THEN
      -- Waits on the window clock become waits in real time.
      IF months[i] > 0 THEN
        IF retry > 0 THEN
          retry := greatest(1, @schema@.real_at(tw + retry, shifts[i], months[i], par) - now);
        END IF;
        IF reset > 0 THEN
          reset := greatest(1, @schema@.real_at(tw + reset, shifts[i], months[i], par) - now);
        END IF;
      END IF;
    END IF;

    sa[i] := a;
    sb[i] := b;
    sc[i] := c;
    sx[i] := now + reset;
    out[2] := i;
    out := out || ARRAY[ok, reason, rem, retry, reset];
    IF ok = 0 THEN
      RETURN out; -- nothing written
    END IF;
  END LOOP;

  FOR i IN 1..n LOOP
    IF charged[i] THEN
      INSERT INTO @schema@.state AS st (name, kind, key, a, b, c, expires)
        VALUES (names[i], kinds[i], keys[i], sa[i], sb[i], sc[i], sx[i])
        ON CONFLICT (name, kind, key) DO UPDATE SET a = excluded.a, b = excluded.b, c = excluded.c, expires = excluded.expires;
    END IF;
  END LOOP;
  RETURN out;
END
$f$;

-- cleanup deletes at most lim rows that expired, skipping rows that a
-- decision holds, and returns how many it deleted.
CREATE OR REPLACE FUNCTION @schema@.cleanup(lim int) RETURNS bigint
LANGUAGE sql VOLATILE AS $f$
  WITH gone AS (
    DELETE FROM @schema@.state WHERE ctid IN (
      SELECT ctid FROM @schema@.state
      WHERE expires <= (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint
      LIMIT lim FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*) FROM gone
$f$;

-- refund gives back, for each hit of an admitted decision, costs[i] on its
-- state, under the same locks in the same order as decide. A token bucket
-- gets back the part of the admission's debt it still owes at now
-- (clock_timestamp(), read once): the admission left it paid off at
-- untils[i] (Unix ns), so min(costs[i], limits[i]) intervals, at most
-- untils[i] - now; nothing once untils[i] has passed, nor while the debt
-- exceeds the burst (tokens owed beyond empty); never fuller than full. A
-- window gets back its count in the window that counted it, the one of at
-- (the admitting decision's now, Unix ns), while the row still holds that
-- window (a sliding window's as its previous count too), never a later
-- window's; no count goes below zero. A state with no row has nothing to
-- give back. Returns the number of states changed. Each former signature is
-- dropped first: CREATE OR REPLACE would add an overload beside it.
DROP FUNCTION IF EXISTS @schema@.refund(text[], smallint[], bytea[], bigint[], bigint[], bigint[], bigint[], int[], int);
DROP FUNCTION IF EXISTS @schema@.refund(text[], smallint[], bytea[], bigint[], bigint[], bigint[], bigint[], int[], int, bigint);
CREATE OR REPLACE FUNCTION @schema@.refund(
  names text[], kinds smallint[], keys bytea[], costs bigint[],
  limits bigint[], params bigint[], shifts bigint[], months int[], wait_ms int, at bigint,
  untils bigint[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
  now bigint := (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint;
  n int := cardinality(names);
  lock bigint;
  w bigint;
  back bigint;
  changed bigint := 0;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RAISE EXCEPTION 'pgstore: a refund needs hits';
  END IF;
  PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
  FOR lock IN
    SELECT DISTINCT hashtextextended(length(u.nm) || ':' || u.nm || ':' || u.kd || ':' || encode(u.ky, 'hex'), 0)
    FROM unnest(names, kinds, keys, costs) AS u(nm, kd, ky, cst) WHERE u.cst > 0 ORDER BY 1
  LOOP
    PERFORM pg_advisory_xact_lock(lock);
  END LOOP;
  FOR i IN 1..n LOOP
    CONTINUE WHEN costs[i] <= 0;
    IF kinds[i] = 1 THEN
      -- As ratelimit.GCRA.RefundLate, of the debt the admission still adds:
      -- the tokens the bucket refilled since are not given back again.
      back := least(least(costs[i], limits[i]) * params[i], untils[i] - now);
      UPDATE @schema@.state st SET a = greatest(st.a - back, now), expires = greatest(st.a - back, now)
        WHERE st.name = names[i] AND st.kind = 1 AND st.key = keys[i]
          AND back > 0 AND st.a > now AND st.a - limits[i] * params[i] <= now;
    ELSE
      -- As concurrency.FixedWindow.Refund and SlidingWindow.Refund: the
      -- admission's window w is the row's current one (b), or for a
      -- sliding window the one before it (c).
      w := div(@schema@.window_at(at, shifts[i], months[i], params[i]), params[i]);
      UPDATE @schema@.state st
        SET b = CASE WHEN st.a = w THEN st.b - least(costs[i], st.b) ELSE st.b END,
            c = CASE WHEN st.a = w THEN st.c ELSE st.c - least(costs[i], st.c) END
        WHERE st.name = names[i] AND st.kind = kinds[i] AND st.key = keys[i]
          AND ((st.a = w AND st.b > 0) OR (kinds[i] = 3 AND st.a = w + 1 AND st.c > 0));
    END IF;
    IF FOUND THEN
      changed := changed + 1;
    END IF;
  END LOOP;
  RETURN changed;
END
$f$;

-- instances holds the heartbeats of the instances that share this schema's
-- limits (pgstore.NewFallback): each instance's id and its last beat in Unix
-- ns on the database's clock.
CREATE TABLE IF NOT EXISTS @schema@.instances (
  id   text   PRIMARY KEY,
  beat bigint NOT NULL
);

-- beat records instance id's heartbeat, forgets the instances that have not
-- beaten within memory_ns, and returns how many are live.
CREATE OR REPLACE FUNCTION @schema@.beat(id text, memory_ns bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
  now bigint := (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint;
  live bigint;
BEGIN
  DELETE FROM @schema@.instances i WHERE i.beat < now - memory_ns AND i.id <> beat.id;
  INSERT INTO @schema@.instances AS i (id, beat) VALUES (beat.id, now)
    ON CONFLICT ON CONSTRAINT instances_pkey DO UPDATE SET beat = excluded.beat;
  SELECT count(*) INTO live FROM @schema@.instances;
  RETURN live;
END
$f$;
