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
// Concurrency limits hand out Leases: a permit held until Release, or until
// its TTL passes, so that a crashed holder cannot leak permits forever.
//
// Errors start with "store: ". A store that cannot answer returns an error
// matching ErrUnavailable (errors.Is), on which a caller chooses to fail
// open or closed; Memory never does.
//
// # Which store for which problem
//
//   - One instance, or limits that may be per instance (a concurrency cap, a
//     per-process burst): Memory, nanoseconds a decision, nothing to run.
//   - Several instances sharing per-request limits (per-IP and per-user
//     bursts, login attempts, concurrency across a fleet): store/redisstore,
//     one round trip of tens of microseconds; Redis keeps nothing on disk.
//   - Quotas over hours, days and billing months that must survive a restart
//     and be read back for billing: store/pgstore, a committed transaction
//     of 1 to 5 ms; not for per-request abuse limits.
//   - Any of the remote stores while it may be down: store/fallback
//     (redisstore.NewFallback, pgstore.NewFallback) decides on this
//     instance's share of each limit until the remote answers again.
//   - One quota across regions, without a cross-region round trip per
//     request: store/regions over each region's store and a global one,
//     within a stated bound; abuse limits per region (N times globally).
//
// bench/README.md measures the three side by side.
package store
