package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/ratelimit"
)

// Updater is a Store whose limits can change in place: a reload that
// changes a limit keeps every key's usage instead of starting keys fresh.
// Callers find it with a type assertion (s.(store.Updater)); a store that
// does not implement it can only register a new limit.
type Updater interface {
	// Update replaces the parameters of limit id with spec's, keeping the
	// limit's ID, its keys and their usage. It returns an error matching
	// ErrUnknownLimit when id is not registered (or was unregistered), and
	// an error starting with "store: " when spec is invalid (Spec.Validate)
	// or changes what cannot change in place; the limit is then unchanged.
	//
	// What may change: Limit; Rate (TokenBucket); LeaseTTL (Concurrency).
	// What may not: Name (it must be the registered one), Algorithm,
	// Window, Capacity (zero and DefaultCapacity are the same) and
	// Overflow: those change how state is counted or kept, so the caller
	// registers a new limit instead, whose keys start fresh.
	//
	// Every key's usage carries over, re-interpreted under the new
	// parameters:
	//   - TokenBucket keeps the tokens each key owes. The new burst applies
	//     to that debt (a key that owes more than the new burst waits until
	//     it owes less) and the bucket refills at the new rate from the
	//     limit's first decision after Update (on Memory, at the
	//     Request.Now of the first Decide or eviction check on the limit;
	//     a network store may take its own clock at Update instead). A new
	//     rate faster than every rate the limit has had keeps the debt in
	//     time instead: the key is full again at the same instant, so until
	//     then it may be admitted less than a token-exact conversion would
	//     allow, never more.
	//   - FixedWindow and SlidingWindow keep their window counts: a key that
	//     counted c in the current window has Limit − c left (none when
	//     c ≥ Limit).
	//   - SlidingLog keeps the times of the admissions that count: in any
	//     interval of length Window that ends at an admission made after
	//     Update, the admissions before and after Update together number
	//     at most the new Limit.
	//   - Concurrency keeps every lease (its permits and its expiry); a
	//     key holding as many permits as the new Limit or more is admitted
	//     nothing until its leases bring it under. A new LeaseTTL applies to
	//     leases taken after Update.
	//
	// Update may run concurrently with Decide and Release. Each Decide
	// decides every hit of its request on one set of parameters, the old
	// or the new, never a mix, and gives back what a rejected request took
	// on the same parameters. A Decide that starts after Update returns
	// decides on the new parameters, so no such Decide admits more than the
	// new limit allows; a Decide that began before may still finish on the
	// old ones (with a lowered limit it may still admit up to the old
	// limit). Errors start with "store: ".
	Update(ctx context.Context, id LimitID, spec Spec) error
}

var _ Updater = (*Memory)(nil)

// Update changes limit id in place (see Updater). On Memory a decision
// racing with it loads the old parameters or the new with one atomic load
// per Decide call; the first decision on a key after Update re-interprets
// its state where the new parameters need it (a SlidingLog key's ring is
// rebuilt for the new limit, allocating 16·Limit bytes). Update copies the
// store's table of limits, one word pair per LimitID ever handed out.
func (m *Memory) Update(_ context.Context, id LimitID, spec Spec) error {
	b, err := spec.build()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.lookup(id)
	if old == nil {
		return fmt.Errorf("%w: limit %d is not registered", ErrUnknownLimit, id)
	}
	if err := checkUpdate(old.registered(), spec); err != nil {
		return err
	}
	l, err := reconfigure(old, spec, b)
	if err != nil {
		return spec.errorf("%w", err)
	}
	next := slices.Clone(*m.limits.Load())
	next[id-1] = l
	m.limits.Store(&next)
	return nil
}

// checkUpdate reports what next changes of was that cannot change in
// place.
func checkUpdate(was, next Spec) error {
	capacity := func(s Spec) int {
		if s.Capacity == 0 {
			return DefaultCapacity
		}
		return s.Capacity
	}
	var what string
	switch {
	case next.Name != was.Name:
		return fmt.Errorf("store: limit %q: Update names it %q; a limit keeps its name", was.Name, next.Name)
	case next.Algorithm != was.Algorithm:
		what = fmt.Sprintf("algorithm (%v to %v)", was.Algorithm, next.Algorithm)
	case next.Window != was.Window:
		what = fmt.Sprintf("window (%v to %v)", was.Window, next.Window)
	case capacity(next) != capacity(was):
		what = fmt.Sprintf("capacity (%d to %d)", capacity(was), capacity(next))
	case next.Overflow != was.Overflow:
		what = fmt.Sprintf("overflow policy (%d to %d)", was.Overflow, next.Overflow)
	default:
		return nil
	}
	return was.errorf("its %s cannot change in place; register a new limit (its keys start fresh)", what)
}

// The limit types of a Memory store, by algorithm.
type (
	bucketLimit  = rateLimit[ratelimit.GCRAState, *ratelimit.GCRAState, *ratelimit.GCRA]
	warpedLimit  = rateLimit[ratelimit.GCRAState, *ratelimit.GCRAState, *warpedBucket]
	fixedLimit   = rateLimit[ratelimit.FixedWindowState, *ratelimit.FixedWindowState, *ratelimit.FixedWindow]
	slidingLimit = rateLimit[ratelimit.SlidingWindowState, *ratelimit.SlidingWindowState, *ratelimit.SlidingWindow]
	logLimit     = rateLimit[ratelimit.SlidingLogState, *ratelimit.SlidingLogState, *ratelimit.SlidingLog]
)

// reconfigure returns limit l with spec's parameters (validated, and of the
// same algorithm and window) on l's keys.
func reconfigure(l memLimit, spec Spec, b built) (memLimit, error) {
	switch l := l.(type) {
	case *bucketLimit:
		return updateBucket(l.keys, l.algo, nil, spec, b)
	case *warpedLimit:
		return updateBucket(l.keys, l.algo.g, l.algo.clock, spec, b)
	case *fixedLimit:
		f, err := l.algo.WithLimit(spec.Limit)
		if err != nil {
			return nil, err
		}
		return withAlgo(l.keys, f, spec, b), nil
	case *slidingLimit:
		sw, err := l.algo.WithLimit(spec.Limit)
		if err != nil {
			return nil, err
		}
		return withAlgo(l.keys, sw, spec, b), nil
	case *logLimit:
		// A SlidingLogState of another limit is rebuilt for this one at
		// its first decision (ratelimit.SlidingLog).
		return withAlgo(l.keys, b.log, spec, b), nil
	case *leaseTable:
		return l.keys.limit(spec, l.id, b), nil
	}
	return nil, fmt.Errorf("unknown limit type %T", l)
}
