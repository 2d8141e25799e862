// Package pgstore is a store.Store on PostgreSQL (through pgx's pgxpool),
// for quotas over long windows: hours, days, calendar months.
//
// # When to choose it over Redis
//
// Choose pgstore for quotas whose accuracy and durability matter more than
// a millisecond: "10 000 API calls a day per tenant", "5 GB a month",
// counts a billing run reads back (Usage) and that must survive a restart
// (redisstore's Redis keeps nothing on disk here). A decision commits a
// transaction: 1 to 5 ms, and every decision writes a row. Keep per-request
// abuse limits (per-IP bursts, login attempts, concurrency caps) on
// store.Memory or redisstore: they decide at high rates over short windows,
// where a write per request to a relational database is the wrong price,
// and pgstore does not keep two of their algorithms (sliding logs and
// leases are a Register error). A shed rule can name a limit of
// each store.
//
// # How it decides
//
// Migrate creates a schema (WithSchema) holding one table of state and a
// PL/pgSQL function, decide, which Decide calls in one statement: one round
// trip, its own implicit transaction, nothing left open across a network
// wait. The function reads clock_timestamp() once, takes a
// transaction-scoped advisory lock on every state the request names in the
// order of their lock numbers (so two decisions never deadlock, and a state
// with no row yet is serialized as well as one with a row: no read-then-write
// race), evaluates the hits in order on that instant with the algorithms of
// ratelimit.GCRA, ratelimit.FixedWindow and ratelimit.SlidingWindow
// (the same decisions as store.Memory's at that instant, to the
// nanosecond), and writes the states only when every hit is admitted. A
// request of costs 0 only (a read-out) locks nothing. Windows are placed by their
// store.Calendar exactly as store.Memory places them: the function computes
// store.WindowClock in SQL (calendar months included), on the database's
// clock.
//
// The advisory locks are numbered by a 64-bit hash of the limit's name and
// the key, in the database's one space of bigint advisory locks: another
// application's lock of the same number only makes a decision wait for it
// (bounded by the deadline). Migrate takes one more (0x736c7569636570).
// Every call is a single statement, so a pooler in transaction mode
// (PgBouncer) works, given a pgx exec mode it supports.
//
// Rows that have expired (a full bucket, a past window) are deleted by
// Cleanup, in bounded batches that skip rows a decision holds; call it from
// a ticker. Reset forgets a key (an operator's pardon, a quota given back),
// Usage reads a key's use of its current window without charging it (a
// store.Usage), and
// Refund (store.Refunder) gives back what an admitted decision charged, in
// one call of the schema's refund function under the same locks: a rule
// that counts only failures, or a cost settled after the work. A token
// bucket gets back only the part of the admission's debt it still owes
// when the refund comes, never the tokens it has refilled since, which
// later admissions may be using.
//
// Decide refuses a hit with a max wait (store.Hit.MaxWait: a token bucket
// reservation) with an error matching errors.ErrUnsupported: the SQL
// function decides at once only. Put rules that wait on Memory or Redis.
//
// # Failures
//
// Every call runs under a per-call deadline (WithTimeout) and is never
// retried: a decision whose reply is lost may have been committed, and a
// retry would charge it twice. A decision still waiting on a lock when the
// deadline passes is rolled back by the database too (pgx cancels it, and
// the function's lock_timeout is the deadline), so such a loss is rare:
// only a reply lost after the commit. A database that is down, slow past the
// deadline, or not migrated fails the call with an error matching
// store.ErrUnavailable, on which the caller fails open or closed (shed's
// failure policy), or NewFallback decides on this instance's share of each
// limit locally until the database answers again (package fallback, as for
// Redis): the instances are counted by their heartbeats in the schema's
// instances table. A decision whose reply was lost is decided locally once
// more; the database rolled it back or committed it, never both, and never
// twice (TestFallbackLostReplyIsChargedOnce).
//
// Migrate again after upgrading: the refund function and the instances
// table came after the first schema, and the refund function now takes the
// admission's instant and the instant each bucket hit left its bucket full
// (every statement is idempotent; the former refund functions are dropped,
// so a Store not upgraded fails its refunds, giving back nothing, until it
// is).
package pgstore
