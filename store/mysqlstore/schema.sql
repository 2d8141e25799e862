-- sluice mysqlstore schema. @state@, @decide@, @cleanup@, @window_at@ and
-- @real_at@ are replaced by the store's quoted names (its prefix and the
-- object's). Statements are separated by a line holding only "-- ;;".
-- Every statement is idempotent, so Migrate may run again.
--
-- Time is nanoseconds since the Unix epoch (BIGINT), read from
-- UTC_TIMESTAMP(6) at its microsecond resolution: the database's clock, in
-- UTC whatever the session's time zone.

-- state holds one row per (limit name, algorithm kind, key) that has been
-- charged: kind 1 is a token bucket (a: the theoretical arrival time, b: 0),
-- kind 2 a fixed window (a: the window index on the window clock, b: its
-- count). expires is the instant from which the row is indistinguishable
-- from no row (a full bucket, a window that has passed). Names and keys are
-- bytes (VARBINARY): compared byte for byte, never by a collation.
CREATE TABLE IF NOT EXISTS @state@ (
  name    VARBINARY(255) NOT NULL,
  kind    SMALLINT       NOT NULL,
  k       VARBINARY(767) NOT NULL,
  a       BIGINT         NOT NULL,
  b       BIGINT         NOT NULL,
  expires BIGINT         NOT NULL,
  PRIMARY KEY (name, kind, k),
  KEY expires (expires)
) ENGINE=InnoDB
-- ;;
-- month_start is 00:00 UTC on the first of month m counted from January
-- 1970 (0; -1 is December 1969), in Unix ns. It is inlined below as
-- TIMESTAMPDIFF(MICROSECOND, '1970-01-01', '1970-01-01' + INTERVAL m MONTH) * 1000.
--
-- window_at is store.WindowClock.At: t (Unix ns) on the window clock of
-- shift (ns), months per window (0: windows of a fixed length) and span
-- (ns). Products of a span and a time are DECIMAL: they pass 2^63.
CREATE OR REPLACE FUNCTION @window_at@(t BIGINT, shift BIGINT, months INT, span BIGINT) RETURNS BIGINT
DETERMINISTIC NO SQL
BEGIN
  DECLARE lt BIGINT DEFAULT t + shift;
  DECLARE d DATE;
  DECLARE m, p, s, e BIGINT;
  IF months = 0 THEN
    RETURN lt;
  END IF;
  -- lt is positive for any time after 1970-01-01 14:00 UTC: DIV is a floor.
  SET d = DATE '1970-01-01' + INTERVAL (lt DIV 86400000000000) DAY;
  SET m = (YEAR(d) - 1970) * 12 + MONTH(d) - 1;
  SET p = FLOOR(m / months);
  SET s = TIMESTAMPDIFF(MICROSECOND, DATE '1970-01-01', DATE '1970-01-01' + INTERVAL (p * months) MONTH) * 1000;
  SET e = TIMESTAMPDIFF(MICROSECOND, DATE '1970-01-01', DATE '1970-01-01' + INTERVAL ((p + 1) * months) MONTH) * 1000;
  RETURN (p + 1) * span + (CAST(lt - s AS DECIMAL(65, 0)) * span) DIV (e - s);
END
-- ;;
-- real_at is store.WindowClock.Real: the earliest Unix ns at which the
-- window clock reads at least at (rounded up).
CREATE OR REPLACE FUNCTION @real_at@(at BIGINT, shift BIGINT, months INT, span BIGINT) RETURNS BIGINT
DETERMINISTIC NO SQL
BEGIN
  DECLARE p, frac, s, e BIGINT;
  IF months = 0 THEN
    RETURN at - shift;
  END IF;
  SET p = at DIV span - 1;
  SET frac = at MOD span;
  SET s = TIMESTAMPDIFF(MICROSECOND, DATE '1970-01-01', DATE '1970-01-01' + INTERVAL (p * months) MONTH) * 1000;
  SET e = TIMESTAMPDIFF(MICROSECOND, DATE '1970-01-01', DATE '1970-01-01' + INTERVAL ((p + 1) * months) MONTH) * 1000;
  RETURN s + (CAST(frac AS DECIMAL(65, 0)) * (e - s) + span - 1) DIV span - shift;
END
-- ;;
-- decide charges every hit of one request, all or nothing. req is a JSON
-- array of hits, each an array of strings: [name (hex), kind (1 token
-- bucket, 2 fixed window), key (hex), cost, limit, param (the emission
-- interval in ns of a bucket, the span in ns of a window on its window
-- clock), shift (ns), months]. ord is a JSON array of hit indexes, one per
-- distinct state, in the one order every decision locks states in (so two
-- decisions never deadlock).
--
-- A charging request (a cost above 0) runs one READ COMMITTED transaction:
-- it first locks every state's row, inserting an empty one where none is
-- (INSERT ... ON DUPLICATE KEY UPDATE takes the row's exclusive lock either
-- way, so a state with no row yet is serialized as well as one with a row:
-- no read-then-write race), then reads the clock once, evaluates the hits in
-- order on that instant with the algorithms of concurrency.GCRA and
-- concurrency.FixedWindow, writing each admitted hit's state, and commits
-- only when every hit is admitted; a rejection rolls everything back,
-- empty rows included. The clock is read after the locks, so the decisions
-- of one state are in the order of their instants. A request of costs 0
-- only (a read-out) locks nothing.
--
-- Reply: one row, one column: "now,evaluated" then per evaluated hit
-- ",allowed,reason,remaining,retry_after,reset_after"; reason 1 is limited,
-- 2 exceeds capacity (retry_after -1: never); waits are ns from now.
CREATE OR REPLACE PROCEDURE @decide@(IN req LONGTEXT, IN ord LONGTEXT)
MODIFIES SQL DATA
decide_body: BEGIN
  -- Locals are named v_*: a local of a column's name would shadow it.
  DECLARE v_n, v_i, v_j INT DEFAULT 0;
  DECLARE v_charging, v_back, v_charged, v_tx BOOLEAN DEFAULT FALSE;
  DECLARE v_name VARBINARY(255);
  DECLARE v_key VARBINARY(767);
  DECLARE v_kind SMALLINT;
  DECLARE v_months INT;
  DECLARE v_now, v_cost, v_lim, v_par, v_shift, v_a, v_b, v_tau, v_debt, v_rem, v_retry, v_reset, v_tw, v_cur BIGINT;
  DECLARE v_ok, v_reason INT;
  DECLARE v_out TEXT DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_tx THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;

  SET v_n = JSON_LENGTH(req);
  IF v_n IS NULL OR v_n < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'mysqlstore: a decision needs hits';
  END IF;
  WHILE v_i < v_n DO
    IF CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][3]')) AS SIGNED) > 0 THEN
      SET v_charging = TRUE;
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  IF v_charging THEN
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SET v_tx = TRUE;
    SET v_i = 0;
    WHILE v_i < JSON_LENGTH(ord) DO
      SET v_j = CAST(JSON_VALUE(ord, CONCAT('$[', v_i, ']')) AS SIGNED);
      INSERT INTO @state@ (name, kind, k, a, b, expires)
        VALUES (UNHEX(JSON_VALUE(req, CONCAT('$[', v_j, '][0]'))),
                CAST(JSON_VALUE(req, CONCAT('$[', v_j, '][1]')) AS SIGNED),
                UNHEX(JSON_VALUE(req, CONCAT('$[', v_j, '][2]'))), 0, 0, 0)
        ON DUPLICATE KEY UPDATE a = a;
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) * 1000;

  SET v_i = 0;
  WHILE v_i < v_n DO
    SET v_name = UNHEX(JSON_VALUE(req, CONCAT('$[', v_i, '][0]')));
    SET v_kind = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][1]')) AS SIGNED);
    SET v_key = UNHEX(JSON_VALUE(req, CONCAT('$[', v_i, '][2]')));
    SET v_cost = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][3]')) AS SIGNED);
    SET v_lim = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][4]')) AS SIGNED);
    SET v_par = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][5]')) AS SIGNED);
    SET v_shift = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][6]')) AS SIGNED);
    SET v_months = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][7]')) AS SIGNED);
    -- Two hits on one state see each other's charges: the earlier one's
    -- write is in this transaction.
    SET v_a = NULL, v_b = NULL;
    SELECT st.a, st.b INTO v_a, v_b FROM @state@ st WHERE st.name = v_name AND st.kind = v_kind AND st.k = v_key;
    SET v_a = IFNULL(v_a, 0), v_b = IFNULL(v_b, 0);
    SET v_charged = FALSE, v_ok = 1, v_reason = 0, v_retry = 0;

    IF v_kind = 1 THEN
      -- Token bucket (concurrency.GCRA): a is the theoretical arrival time.
      SET v_tau = v_lim * v_par;
      SET v_debt = GREATEST(0, v_a - v_now);
      SET v_rem = GREATEST(0, v_tau - v_debt) DIV v_par;
      SET v_reset = v_debt;
      IF v_cost > v_lim THEN
        SET v_ok = 0, v_reason = 2, v_retry = -1;
      ELSEIF v_cost > 0 THEN
        IF v_debt + v_cost * v_par > v_tau THEN
          SET v_ok = 0, v_reason = 1, v_retry = v_debt + v_cost * v_par - v_tau;
        ELSE
          SET v_debt = v_debt + v_cost * v_par;
          SET v_a = v_now + v_debt;
          SET v_rem = (v_tau - v_debt) DIV v_par;
          SET v_reset = v_debt;
          SET v_charged = TRUE;
        END IF;
      END IF;
    ELSE
      -- Fixed window (concurrency.FixedWindow) on the window clock: a is
      -- the window index, b the count.
      SET v_tw = @window_at@(v_now, v_shift, v_months, v_par);
      SET v_cur = v_tw DIV v_par;
      SET v_back = FALSE;
      IF v_cur > v_a THEN
        SET v_a = v_cur, v_b = 0;
      ELSEIF v_cur < v_a THEN
        SET v_back = TRUE;
      END IF;
      SET v_rem = IF(v_back, 0, GREATEST(0, v_lim - v_b));
      SET v_reset = CASE WHEN v_b > 0 THEN (v_a + 1) * v_par - v_tw WHEN v_back THEN v_a * v_par - v_tw ELSE 0 END;
      IF v_cost > v_lim THEN
        SET v_ok = 0, v_reason = 2, v_retry = -1;
      ELSEIF v_cost > 0 AND (v_back OR v_b + v_cost > v_lim) THEN
        SET v_ok = 0, v_reason = 1;
        SET v_retry = IF(v_back AND v_b + v_cost <= v_lim, v_a * v_par - v_tw, (v_a + 1) * v_par - v_tw);
      ELSEIF v_cost > 0 THEN
        SET v_b = v_b + v_cost;
        SET v_rem = GREATEST(0, v_lim - v_b);
        SET v_reset = (v_a + 1) * v_par - v_tw;
        SET v_charged = TRUE;
      END IF;
      -- Waits on the window clock become waits in real time.
      IF v_months > 0 THEN
        IF v_retry > 0 THEN
          SET v_retry = GREATEST(1, @real_at@(v_tw + v_retry, v_shift, v_months, v_par) - v_now);
        END IF;
        IF v_reset > 0 THEN
          SET v_reset = GREATEST(1, @real_at@(v_tw + v_reset, v_shift, v_months, v_par) - v_now);
        END IF;
      END IF;
    END IF;

    SET v_out = CONCAT(v_out, ',', v_ok, ',', v_reason, ',', v_rem, ',', v_retry, ',', v_reset);
    IF v_ok = 0 THEN
      IF v_tx THEN
        ROLLBACK; -- nothing written, no empty row left
      END IF;
      SELECT CONCAT(v_now, ',', v_i + 1, v_out) AS reply;
      LEAVE decide_body;
    END IF;
    IF v_charged THEN
      UPDATE @state@ SET a = v_a, b = v_b, expires = v_now + v_reset
        WHERE name = v_name AND kind = v_kind AND k = v_key;
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  IF v_tx THEN
    COMMIT;
  END IF;
  SELECT CONCAT(v_now, ',', v_n, v_out) AS reply;
END
-- ;;
-- cleanup deletes at most lim rows that expired, skipping rows that a
-- decision holds (FOR UPDATE SKIP LOCKED), in one short transaction, and
-- returns how many it deleted.
CREATE OR REPLACE PROCEDURE @cleanup@(IN lim INT)
MODIFIES SQL DATA
BEGIN
  DECLARE v_done BOOLEAN DEFAULT FALSE;
  DECLARE v_gone BIGINT DEFAULT 0;
  DECLARE v_name VARBINARY(255);
  DECLARE v_kind SMALLINT;
  DECLARE v_key VARBINARY(767);
  DECLARE v_now BIGINT;
  DECLARE expired CURSOR FOR
    SELECT name, kind, k FROM @state@ WHERE expires <= v_now LIMIT lim FOR UPDATE SKIP LOCKED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) * 1000;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  OPEN expired;
  batch: LOOP
    FETCH expired INTO v_name, v_kind, v_key;
    IF v_done THEN
      LEAVE batch;
    END IF;
    DELETE FROM @state@ WHERE name = v_name AND kind = v_kind AND k = v_key;
    SET v_gone = v_gone + 1;
  END LOOP;
  CLOSE expired;
  COMMIT;
  SELECT v_gone;
END
-- ;;
-- members holds one row per live instance of a fallback.Store around the
-- store's prefix: its id and its last heartbeat (Unix ns).
CREATE TABLE IF NOT EXISTS @members@ (
  instance VARBINARY(32) NOT NULL PRIMARY KEY,
  seen     BIGINT        NOT NULL
) ENGINE=InnoDB
-- ;;
-- beat records instance as live (joining, 1) or takes it out (leaving, 0),
-- forgets instances silent for longer than memory_ns, and returns how many
-- instances are live. Each statement commits on its own: no lock is held
-- across statements.
CREATE OR REPLACE PROCEDURE @beat@(IN v_instance VARBINARY(32), IN memory_ns BIGINT, IN joining BOOLEAN)
MODIFIES SQL DATA
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) * 1000;
  IF joining THEN
    INSERT INTO @members@ (instance, seen) VALUES (v_instance, v_now)
      ON DUPLICATE KEY UPDATE seen = v_now;
    DELETE FROM @members@ WHERE seen < v_now - memory_ns;
  ELSE
    DELETE FROM @members@ WHERE instance = v_instance;
  END IF;
  SELECT COUNT(*) FROM @members@;
END
-- ;;
-- refund gives back, for each hit of an admitted decision (req and ord as
-- decide's), its cost on its state, under row locks taken in decide's
-- order. A token bucket gets back the part of the admission's debt it
-- still owes at now: the admission left it paid off at untils[i] (a JSON
-- array of one Unix ns per hit, as strings), so min(cost, limit)
-- intervals, at most untils[i] - now; nothing once untils[i] has passed,
-- nor while the debt exceeds the burst (tokens owed beyond empty); never
-- fuller than full. A fixed window gets back its count in the window that
-- counted it, the one of at (the admitting decision's now, Unix ns), while
-- the row still holds that window, never a later window's. No count goes
-- below zero, and a state with no row has nothing to give back. Returns
-- the number of states changed. CREATE OR REPLACE replaces a former
-- version whatever its parameters.
CREATE OR REPLACE PROCEDURE @refund@(IN req LONGTEXT, IN ord LONGTEXT, IN at BIGINT, IN untils LONGTEXT)
MODIFIES SQL DATA
BEGIN
  DECLARE v_n, v_i, v_j INT DEFAULT 0;
  DECLARE v_name VARBINARY(255);
  DECLARE v_key VARBINARY(767);
  DECLARE v_kind SMALLINT;
  DECLARE v_months INT;
  DECLARE v_now, v_cost, v_lim, v_par, v_shift, v_cur, v_back, v_changed, v_dummy BIGINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_dummy = 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  SET v_n = JSON_LENGTH(req);
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  WHILE v_i < JSON_LENGTH(ord) DO
    SET v_j = CAST(JSON_VALUE(ord, CONCAT('$[', v_i, ']')) AS SIGNED);
    SELECT a INTO v_dummy FROM @state@
      WHERE name = UNHEX(JSON_VALUE(req, CONCAT('$[', v_j, '][0]')))
        AND kind = CAST(JSON_VALUE(req, CONCAT('$[', v_j, '][1]')) AS SIGNED)
        AND k = UNHEX(JSON_VALUE(req, CONCAT('$[', v_j, '][2]'))) FOR UPDATE;
    SET v_i = v_i + 1;
  END WHILE;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) * 1000;
  SET v_i = 0;
  WHILE v_i < v_n DO
    SET v_name = UNHEX(JSON_VALUE(req, CONCAT('$[', v_i, '][0]')));
    SET v_kind = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][1]')) AS SIGNED);
    SET v_key = UNHEX(JSON_VALUE(req, CONCAT('$[', v_i, '][2]')));
    SET v_cost = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][3]')) AS SIGNED);
    SET v_lim = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][4]')) AS SIGNED);
    SET v_par = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][5]')) AS SIGNED);
    SET v_shift = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][6]')) AS SIGNED);
    SET v_months = CAST(JSON_VALUE(req, CONCAT('$[', v_i, '][7]')) AS SIGNED);
    IF v_cost > 0 THEN
      IF v_kind = 1 THEN
        -- As ratelimit.GCRA.RefundLate, of the debt the admission still adds:
        -- the tokens the bucket refilled since are not given back again.
        SET v_back = LEAST(LEAST(v_cost, v_lim) * v_par,
          CAST(JSON_VALUE(untils, CONCAT('$[', v_i, ']')) AS SIGNED) - v_now);
        UPDATE @state@ SET a = GREATEST(a - v_back, v_now), expires = a
          WHERE name = v_name AND kind = 1 AND k = v_key
            AND v_back > 0 AND a > v_now AND a - v_lim * v_par <= v_now;
      ELSE
        -- As concurrency.FixedWindow.Refund: the admission's window, while
        -- the row counts it.
        SET v_cur = @window_at@(at, v_shift, v_months, v_par) DIV v_par;
        UPDATE @state@ SET b = b - LEAST(v_cost, b)
          WHERE name = v_name AND kind = 2 AND k = v_key AND a = v_cur AND b > 0;
      END IF;
      SET v_changed = v_changed + ROW_COUNT();
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT v_changed;
END
