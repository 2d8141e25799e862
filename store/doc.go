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
// Errors start with "store: ". A store that cannot answer returns an error
// matching ErrUnavailable (errors.Is), on which a caller chooses to fail
// open or closed; Memory never does.
package store
