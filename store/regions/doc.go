// Package regions enforces quotas across regions without a cross-region
// round trip per request: each region decides on its own store in real
// time, and a background sync exchanges every key's usage through a global
// store, so that each region admits a key at most its allowance:
//
//	allowance = limit − ⌊headroom·limit⌋ − what the other regions used
//
// in the current window, as of the last sync (headroom 10% by default).
//
// Store is the composition, a store.Store for shed like any other: New
// takes the region's name, the region's store (a redisstore.Store on the
// region's Redis, a store.Memory in one process, either wrapped in a
// fallback.Store) and an Exchange, the global store (redisstore.NewExchange
// on a global Redis; MemoryExchange in one process). Quota limits, fixed
// windows, are global by default; limits marked WithPerRegion (abuse
// limits: per-IP bursts, login attempts) are enforced in full by each
// region, N times the limit globally for N regions, with no exchange.
//
// A global quota refuses a hit with a max wait (store.Hit.MaxWait) with an
// error matching errors.ErrUnsupported: its allowance is of the current
// window, and a slot reserved in a later one would be counted against it.
// A per-region limit reserves on the region's store.
//
// # The sync and its bound
//
// Every period P (WithPeriod, 2 s by default), at the multiples of P on the
// wall clock, each region publishes its count of every key it tracks in the
// current window, and a read delay d later (WithReadDelay, P/4 by default)
// reads the sum of the other regions' counts. While every Publish of a round
// reaches the global store within d, a region's view of the others is at
// most W = P + d + ℓ old, ℓ the latency of its read. So, for every key and
// window:
//
//	global admissions ≤ limit − headroom + (what all regions but one admit in any W)
//
// — for two regions, at most the traffic one region admits in one W beyond
// the headroom: with a headroom at least that traffic, never more than the
// limit. (Take the region that admitted last: its last admission kept its
// own count within limit − headroom − the others' counts of at most W
// before; what the others admitted since is the excess. A key a region
// meets for the first time has no view until its next read, within W, and
// the bound holds with that region's own traffic in W instead.)
// TestPropertyOverAdmissionBound checks it in virtual time with random
// regions, rates, periods and latencies.
//
// A region cut off from the global store (its sync fails) keeps enforcing
// its last allowances; the others do not see its new usage, so what it
// admits while cut off adds to the excess, at most its remaining allowance
// per key. When the global store answers again, the next round publishes
// its counts and reads the others': the allowances converge within one
// period (TestCutOffRegionKeepsItsLastAllowanceAndConverges).
//
// # Costs
//
// A decision costs the region store's Decide, plus two short critical
// sections on a sharded table of the keys in their current window (at most
// WithCapacity keys; a new key beyond it fails with store.ErrUnavailable,
// charging nothing, for the rule's failure policy); a rejection for the
// allowance costs one Refund more. A sync carries every key tracked, once
// per period. Windows must be placed alike in every region (every store
// does, from the same store.Calendar), and the regions' clocks agree to
// within the read delay.
package regions
