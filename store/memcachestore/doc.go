// Package memcachestore is a store.Store on Memcached (through
// github.com/bradfitz/gomemcache), for fixed-window limits where Memcached
// is what a team runs and Redis is not available.
//
// # What it keeps, and why only that
//
// Fixed windows only (store.FixedWindow, on any store.Calendar). Memcached
// has an atomic incr on one key, but no scripting and no atomic operation
// over several keys, so token buckets, sliding windows, sliding logs and
// concurrency leases (which read and write state together) cannot be exact
// there: registering one is an error that says so. Use redisstore for
// them.
//
// # How it decides
//
// A hit of cost c in window w is one incr by c of the counter
// prefix:<hash>:w (the hash: 128 bits of SHA-256 of the limit's name and
// the key, so any bytes are a key); the window's first request adds the
// counter instead, expiring two windows later, and adds the window's
// marker beside it. The hit is admitted when incr returns at most the
// limit; otherwise it takes its c back (decr). Memcached has no clock a
// client can read, so windows are placed on Request.Now (the caller's
// clock, internal clock.Now in shed): instances sharing a limit must keep
// their clocks in step, and a skew of d moves their window boundaries
// apart by d.
//
// # Requests of several limits: the bound
//
// Hits are charged in order; when hit j rejects, hits 0..j-1 are given back
// with decr before Decide returns, and hits after j are not evaluated. That
// is all or nothing for the request, but not atomic for others: until the
// give-back lands (one round trip per hit), other requests see those
// charges. The bound, tested by 8 callers racing layered requests:
//
//   - over-admission: none. A hit is admitted only when the count after its
//     incr, which includes every charge admitted and every charge still in
//     flight, is within the limit, so no window ever admits more than its
//     limit (evictions aside, below).
//   - under-admission: a request may be rejected because of charges that
//     are then given back: at most the costs of the requests in flight on
//     that key when it is decided (8 callers, a limit of 40: 39 or 40
//     admitted).
//   - a give-back that fails (memcached down after the incr) leaves its
//     units counted until the window ends: fewer admissions, never more.
//     So does a call that fails part-way: the store does not spend a
//     Timeout per hit giving back to a server that stopped answering.
//     Stats counts the hits given back and those that were not.
//
// Decide refuses a hit with a max wait (store.Hit.MaxWait: a reservation)
// with an error matching errors.ErrUnsupported (store.RefuseReserve): it
// decides at once only.
//
// # Eviction
//
// Memcached evicts under memory pressure (it has no noeviction policy), and
// an evicted counter is a reset limit: up to a whole limit more in that
// window. The store detects it two ways and counts it (Stats.Evictions):
// a counter made anew in a window whose marker is still there, and a
// counter lower than the units this Store itself admitted on it in the
// window (a table of 1024 recent counters per Store, bounded). Detection is
// a lower bound (an eviction that took the marker and that no instance had
// counted goes unseen: in a test that filled a 2 MiB memcached, 172 of 200
// evicted counters were detected); a Reset made by another instance is
// also counted as one. Give Memcached memory to spare and watch its
// evictions statistic.
//
// # Failures
//
// The client's Timeout is the deadline of each round trip (set it to tens
// of milliseconds; gomemcache takes no context, so a call already sent
// runs to it). A server that fails or misses it fails the call with an
// error matching store.ErrUnavailable within about one Timeout, whatever
// the number of hits (what they had charged stays counted, as above);
// NewFallback decides on a local share meanwhile (with a
// fixed number of instances: memcached cannot count them).
package memcachestore
