// Package fallback keeps a remote store's limits enforced while the remote
// store is down: Store wraps any store.Store that does I/O (redisstore,
// pgstore) in a circuit breaker, and decides on a local store.Memory, on
// this instance's share of every limit, while the remote fails.
//
// The share is each limit divided by N, the number of live instances. N is
// counted on the remote itself through a Membership (a heartbeat of every
// instance: a Redis sorted set, a PostgreSQL table) or fixed with
// WithInstances. The remote's package hands out its Membership with a
// constructor of its own (redisstore.NewFallback, pgstore.NewFallback).
// The heartbeat is also the probe that closes the breaker again.
//
// # Bounds
//
// While the remote answers every instance, a limit holds exactly across
// them (it is the remote's). While it fails for all of them, each decides
// on limit ÷ N locally (N as it was when its breaker opened, however few
// instances a remote that comes back empty counts before the breaker
// closes), so together they admit at most the limit from then on (the local
// stores do not know what the remote had counted in the current window).
// When k of N instances lose the remote while the others keep it (a
// partition), those on the remote share the whole limit and each cut-off
// instance admits its share: at most limit·(1 + k/N) in all. A cut-off
// instance goes on counting in the others' N for the instance memory (a
// minute by default, see WithInstanceMemory), so the bound still holds when
// the remote then fails for them too within that time; one that Closes
// leaves N at once.
//
// A decision whose reply is lost fails the remote call with
// store.ErrUnavailable, and the Store decides it once more locally, on the
// share: the remote may have charged it as well, so a lost reply costs at
// most one decision's cost counted twice, never an admission past the
// share.
//
// Every mode change is counted (Stats, and Health for shed's metrics) and
// logged, at most one line a second.
package fallback
