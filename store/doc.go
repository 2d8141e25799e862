// Package store holds sluice's keyed limit state behind one small
// interface, Store, and its default in-process implementation, Memory.
//
// A Store keeps rate, quota and concurrency state per key (an IP, a user, an
// API key, a tenant: already hashed by the caller, never a raw secret). The
// limits are registered once as Specs (and unregistered when no longer
// needed, which frees their state); each request then names up to
// MaxHits (limit, key, cost) triples in a Request, and the Store decides
// them all in one call, all or nothing: if any limit rejects, nothing is
// charged and the Result says which limit decided. One call is one round
// trip for a network store (see store/redisstore), which evaluates the same
// algorithms server-side on the server's clock.
//
// A store that implements Updater (Memory does) changes a registered
// limit's parameters in place, keeping every key's usage: a reload that
// raises a quota from 3 to 4 leaves a tenant that used 3 exactly 1 more.
// One that implements KeyLister (Memory does; redisstore does not) reports
// a limit's most used keys by hash, read from its table when asked, and
// resets one by its hash.
//
// A token bucket hit may wait (Hit.MaxWait): when it does not fit now but
// fits within its max wait, the store reserves the exact instant it fits,
// charged now as if admitted then, and Result.Wait tells the caller how
// long to wait before the work starts; Refunder.Refund cancels a
// reservation whose work will not run. Memory and redisstore reserve;
// pgstore refuses a max wait (errors.ErrUnsupported).
//
// Concurrency limits hand out Leases: a permit held until Release, or until
// its TTL passes, so that a crashed holder cannot leak permits forever.
//
// # Which store for which problem
//
// Every store keeps the same contract (the storetest conformance suite
// runs on each); they differ in what they keep, what they survive and what
// a decision costs. Figures: bench BenchmarkStores, one daily fixed-window
// decision from 8 concurrent callers over 1000 keys on the shared 2-core
// development machine (see bench/README.md; the ratios carry over, the
// absolute figures are pessimistic).
//
//	problem                            store                       keeps                   p50 / p99               decisions/s
//	load shedding, per-instance caps   Memory                      every algorithm         0.1 µs / 0.2-0.3 µs     2.4-3.0 M
//	abuse limits shared by instances   redisstore (+ fallback)     every algorithm         0.15-0.2 ms / 0.4-4 ms  22-48 k
//	  (per-IP bursts, logins, leases)
//	quotas over hours, days, months    pgstore (+ fallback)        buckets, fixed and      2.5-3.3 ms / 18-24 ms   1.5-2.1 k
//	  (billing, survives restarts)                                   sliding windows
//	                                   mysqlstore (+ fallback)     buckets, fixed windows  3.4-6.2 ms / 32-58 ms   0.8-1.3 k
//	fixed windows shared by instances  memcachestore (+ fallback)  fixed windows only;     14 µs / 1.2-2.5 ms      72-133 k
//	  where only Memcached runs                                      evictions reset them
//
// Redis keeps nothing on disk here, so a quota that must survive a restart
// or be read back for billing (a Usage, from pgstore's and mysqlstore's
// Usage) belongs in a database, where a decision commits a transaction:
// use it for windows of hours and more, not per request bursts.
// Memcached's one incr is the cheapest round trip, but it decides fixed
// windows only and forgets what it evicts (memcachestore counts the
// evictions it sees). The package
// store/fallback (redisstore.NewFallback, pgstore.NewFallback,
// mysqlstore.NewFallback, memcachestore.NewFallback) keeps every remote
// store's limits enforced on this instance's share while the remote is
// down. For one quota across regions without a cross-region round trip
// per request, store/regions decides on each region's store and syncs
// usage through a global one, within a stated bound (abuse limits per
// region: N times globally).
//
// Errors start with "store: ". A store that cannot answer returns an error
// matching ErrUnavailable (errors.Is), on which a caller chooses to fail
// open or closed; Memory never does.
package store
