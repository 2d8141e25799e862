// Package mysqlstore is a store.Store on MariaDB (through
// github.com/go-sql-driver/mysql and database/sql), for quotas over long
// windows: hours, days, calendar months, on a relational database a team
// already runs.
//
// # When to choose it
//
// Like store/pgstore, and for the same problems: quotas whose accuracy and
// durability matter more than a millisecond ("10 000 API calls a day per
// tenant", a monthly plan), counts a billing run reads back (Usage) and
// that must survive a restart. Every decision commits a transaction and
// writes a row: keep per-request abuse limits (per-IP bursts, login
// attempts, concurrency caps) on store.Memory or redisstore. It keeps token
// buckets and fixed windows; other algorithms are a Register error.
//
// # How it decides
//
// Migrate creates, in the connection's database, a table (prefix_state)
// and a stored procedure (prefix_decide) that Decide calls in one
// statement: one round trip in MariaDB's text protocol (no prepared
// statement, so no second round trip), the hits passed as JSON string
// literals that hold only hex digits and decimals. The procedure runs one
// READ COMMITTED transaction: it takes the exclusive row lock of every
// state the request names, in one order (name, kind, key bytes) so that
// two decisions never deadlock, inserting an empty row where none is (an
// INSERT ... ON DUPLICATE KEY UPDATE locks a missing row's place as well as
// an existing row: no read-then-write race); it then reads the database's
// clock once (UTC_TIMESTAMP(6), whatever the session's time zone),
// evaluates the hits in order with the algorithms of ratelimit.GCRA and
// ratelimit.FixedWindow (the same decisions as store.Memory's at that
// instant, to the nanosecond), and commits only when every hit is
// admitted; a rejection rolls it all back, empty rows included. Windows
// are placed by their store.Calendar exactly as store.Memory places them
// (calendar months included), on the database's clock. A request of costs
// 0 only (a read-out, Usage) locks nothing.
//
// Rows that have expired (a full bucket, a past window) are deleted by
// Cleanup, in bounded batches that skip rows a decision holds (FOR UPDATE
// SKIP LOCKED); call it from a ticker. Reset forgets a key (an operator's
// pardon), Refund gives back what an admitted decision charged (one more
// CALL, under the same locks in the same order; a window's count in the
// window that counted it; of a token bucket's debt only the part the
// admission still owes when the refund comes, never the tokens refilled
// since, which later admissions may be using; run Migrate again after
// upgrading: the refund procedure takes the admission's instant and the
// instant each bucket hit left its bucket full), and Usage reads a key's
// use of its current window without charging it (a store.Usage). Update
// changes a limit in place (its Limit; not a token bucket's rate).
//
// Decide refuses a hit with a max wait (store.Hit.MaxWait: a reservation)
// with an error matching errors.ErrUnsupported: its SQL decides at once
// only. Put rules that wait on Memory or Redis.
//
// # Failures
//
// Every call runs under a per-call deadline (WithTimeout) on both sides:
// the client gives up after it, and the server aborts the statement after
// three quarters of it (SET STATEMENT max_statement_time ... FOR), so a
// decision still waiting on a lock is rolled back rather than committed
// after the caller left, unless the statement reached the server more than
// a quarter of the deadline after the call began (then it may still commit
// after the caller gave up: charged, never admitted, the safe side).
// The store never retries a call whose outcome it does not know: a
// decision whose reply is lost after the commit stays charged, and a retry
// would charge it twice. It runs again only a decision the server rolled
// back as a deadlock's victim (InnoDB's gap locks can cross when new
// states' rows are inserted side by side; rare), within the same deadline. A database that is
// down, slow past the deadline, or not migrated fails the call with an
// error matching store.ErrUnavailable, on which the caller fails open or
// closed (shed's failure policy).
//
// # Servers
//
// It needs MariaDB 10.6 or later (JSON_VALUE, SKIP LOCKED, SET STATEMENT,
// max_statement_time); it is tested on MariaDB 10.11. MySQL proper lacks
// SET STATEMENT ... FOR and max_statement_time for procedures, so it is not
// supported. The store's connections must run with autocommit on (the
// default): its procedures open and end their transactions themselves.
// Names and keys are bytes, compared byte for byte (VARBINARY
// columns): a limit's name is at most MaxNameLen bytes, a key at most
// MaxKeyLen.
package mysqlstore
