package store

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
)

// rateAlgo is what the concurrency package's rate configurations have in
// common: a decision, a refund and a recovery test on a per-key state S.
type rateAlgo[S any] interface {
	AllowN(s *S, now, n int64) ratelimit.Decision
	Refund(s *S, now, n int64)
	Recovered(s *S, now int64) bool
}

// rateLimit is a rate limit of a Memory store: an algorithm and the keys'
// states it decides on. It is immutable: Update makes a new rateLimit of the
// new parameters on the same rateKeys, so that one Decide call, which loads
// the store's limits once, decides and undoes every hit on one set of
// parameters.
type rateLimit[S any, P interface {
	*S
	Reset()
}, A rateAlgo[S]] struct {
	algo  A
	table *concurrency.Table[S, P] // keys.table
	share bool
	// reserve is CheckReserve(spec) == nil: a hit may wait.
	reserve bool
	limit   int64
	b       built
	spec    Spec
	keys    *rateKeys[S, P]
}

// rateKeys is the state of a rate limit that survives Update: the table of
// per-key states, and the shared state of OverflowShare. The table rejects
// keys that do not fit; the shared state lives here, so that undo and the
// Overflow flag know where a hit was counted.
type rateKeys[S any, P interface {
	*S
	Reset()
}] struct {
	table *concurrency.Table[S, P]
	// recovered is the Recovered of the parameters in force, which the
	// table's eviction test calls.
	recovered atomic.Pointer[func(s *S, now int64) bool]
	// shared is OverflowShare's state for keys that do not fit. A key flood
	// writes it from every core: the padding keeps those writes off the
	// line of the read-only fields above, which evictions read.
	_      [cacheLine]byte
	shared S
}

// cacheLine is the padding unit (as in package concurrency: 128 bytes
// covers adjacent-line prefetching).
const cacheLine = 128

func newRateLimit[S any, P interface {
	*S
	Reset()
}, A rateAlgo[S]](algo A, capacity int, spec Spec, b built) (*rateLimit[S, P, A], error) {
	k := new(rateKeys[S, P])
	t, err := concurrency.NewTable[S, P](capacity, func(s *S, now int64) bool { return (*k.recovered.Load())(s, now) })
	if err != nil {
		return nil, err
	}
	k.table = t
	return withAlgo(k, algo, spec, b), nil
}

// withAlgo returns the rate limit of algo on k's states and makes algo's
// Recovered the table's eviction test. The caller publishes the result at
// once (Register, Update): from now on evictions judge states by it.
func withAlgo[S any, P interface {
	*S
	Reset()
}, A rateAlgo[S]](k *rateKeys[S, P], algo A, spec Spec, b built) *rateLimit[S, P, A] {
	rec := algo.Recovered
	k.recovered.Store(&rec)
	return &rateLimit[S, P, A]{algo: algo, table: k.table, share: spec.Overflow == concurrency.OverflowShare,
		reserve: CheckReserve(spec) == nil, limit: spec.Limit, b: b, spec: spec, keys: k}
}

// lateAlgo is a rate configuration whose refund after the work differs
// from its refund at the admission: a token bucket's
// (ratelimit.GCRA.RefundLate).
type lateAlgo[S any] interface {
	RefundLate(s *S, at, now, n, until int64)
}

// reserveAlgo is a rate configuration that can reserve (a token bucket,
// warped or not); the times and waits are the limit's own.
type reserveAlgo[S any] interface {
	ReserveN(s *S, now, n int64, minWait, maxWait time.Duration) ratelimit.Reservation
	Cancel(s *S, now, n int64, r ratelimit.Reservation)
}

func (r *rateLimit[S, P, A]) decide(h *Hit, now int64, wait time.Duration, out *HitResult) {
	at := r.b.clock.At(now) // a window limit runs on its calendar's window clock
	ref, ok := r.table.Get(h.Key, at)
	st := &r.keys.shared
	if ok {
		st = ref.Value()
	} else {
		out.Overflow = true
	}
	switch {
	case !ok && !r.share:
		out.Decision = overflowed(r.limit, h.Cost, r.b)
	case h.Cost > 0 && (h.MaxWait > 0 || wait > 0) && r.reserve:
		r.reserveN(st, h, at, wait, out)
	default:
		out.Decision = r.allowN(st, at, h.Cost)
	}
	if ok {
		// Not deferred: a deferred call costs a closure call on every
		// decision. The algorithms do not panic on the hits Decide lets
		// through (a panic would leave the entry pinned, never evicted).
		ref.Release()
	}
	if r.b.clock.Months() != 0 {
		// Only calendar months run at another pace than the time: the
		// waits of the others are the same on both clocks.
		out.Decision = r.b.clock.Decision(now, at, out.Decision)
	}
}

// decideBucket is r.decide, on a token bucket at its registered rate
// (bucketLimit), for a hit that does not reserve (no max wait, no
// request wait), as a plain function: rateLimit's methods are compiled once
// for every pointer algorithm and reach r.algo through a dictionary. A
// token bucket has no calendar: it decides at now itself.
func decideBucket(r *bucketLimit, h *Hit, now int64, out *HitResult) {
	ref, ok := r.table.Get(h.Key, now)
	switch {
	case ok:
		out.Decision = r.algo.AllowN(ref.Value(), now, h.Cost)
		ref.Release() // not deferred, as in decide
	case r.share:
		out.Overflow = true
		out.Decision = r.algo.AllowN(&r.keys.shared, now, h.Cost)
	default:
		out.Overflow = true
		out.Decision = overflowed(r.limit, h.Cost, r.b)
	}
}

// reserveN decides h on st at now, on the window clock, reserving the
// instant it fits. The limit is a token bucket, or a fixed window of a
// fixed length, whose window clock is a shift of the time, so that waits on
// it are real ones: reserved from wait on, within the hit's own max wait,
// or exactly at wait when that is shorter (the request starts then anyway).
func (r *rateLimit[S, P, A]) reserveN(st *S, h *Hit, now int64, wait time.Duration, out *HitResult) {
	rv := any(r.algo).(reserveAlgo[S]).ReserveN(st, now, h.Cost, wait, max(wait, h.MaxWait))
	out.Decision = rv.Decision
	if rv.Allowed() && rv.Wait > 0 {
		out.Wait, out.Reserved = rv.Wait, rv.End
	}
}

// allowN is r.algo.AllowN called directly for the algorithms of a Memory
// store: through the type parameter, every pointer algorithm shares one
// instance of rateLimit's methods and the call goes through its dictionary.
// newMemLimit and Update pair each algorithm with its own state, so the
// assertion on s holds whenever the one on the algorithm does.
func (r *rateLimit[S, P, A]) allowN(s *S, now, n int64) ratelimit.Decision {
	switch a := any(r.algo).(type) {
	case *ratelimit.GCRA:
		return a.AllowN(any(s).(*ratelimit.GCRAState), now, n)
	case *warpedBucket:
		return a.AllowN(any(s).(*ratelimit.GCRAState), now, n)
	case *ratelimit.FixedWindow:
		return a.AllowN(any(s).(*ratelimit.FixedWindowState), now, n)
	case *ratelimit.SlidingWindow:
		return a.AllowN(any(s).(*ratelimit.SlidingWindowState), now, n)
	case *ratelimit.SlidingLog:
		return a.AllowN(any(s).(*ratelimit.SlidingLogState), now, n)
	}
	return r.algo.AllowN(s, now, n)
}

func (r *rateLimit[S, P, A]) undo(h *Hit, now, late int64, out *HitResult) {
	if h.Cost == 0 {
		return
	}
	now = r.b.clock.At(now)
	st := &r.keys.shared
	if out.Overflow {
		if !r.share {
			return
		}
	} else {
		// Lookup, not Get: an entry that was evicted meanwhile (it
		// recovered) has nothing left to give back, and a fresh one must
		// not be made.
		ref, ok := r.table.Lookup(h.Key)
		if !ok {
			return
		}
		st = ref.Value()
		defer ref.Release()
	}
	if out.Wait > 0 {
		rv := ratelimit.Reservation{Decision: out.Decision, Wait: out.Wait, End: out.Reserved}
		any(r.algo).(reserveAlgo[S]).Cancel(st, now, h.Cost, rv)
		return
	}
	if late > now { // after the work, not a rollback
		if b, ok := any(r.algo).(lateAlgo[S]); ok {
			// A bucket's clock is the time itself; the admission left it
			// paid off at now plus its ResetAfter.
			b.RefundLate(st, now, late, h.Cost, now+int64(out.Decision.ResetAfter))
			return
		}
	}
	r.algo.Refund(st, now, h.Cost)
}

func (r *rateLimit[S, P, A]) release(lease Lease, _ int64) (bool, error) {
	return false, fmt.Errorf("store: lease names limit %d, which is not a concurrency limit", lease.Limit)
}

func (r *rateLimit[S, P, A]) stats() concurrency.TableStats { return r.table.Stats() }

func (r *rateLimit[S, P, A]) registered() Spec { return r.spec }

func (r *rateLimit[S, P, A]) prefetch(key string) { r.table.Prefetch(key) }
func (r *rateLimit[S, P, A]) prefetches() bool    { return r.table.Prefetches() }

// leaseTable is a Concurrency limit of a Memory store. Like rateLimit it is
// immutable: Update makes a new one of the new limit and TTL on the same
// keys.
type leaseTable struct {
	cfg   leaseLimit
	id    LimitID
	table *concurrency.Table[leaseState, *leaseState] // keys.table
	share bool
	b     built
	spec  Spec
	keys  *leaseKeys
}

// leaseKeys is the state of a Concurrency limit that survives Update.
type leaseKeys struct {
	table  *concurrency.Table[leaseState, *leaseState]
	_      [cacheLine]byte // see rateKeys.shared
	shared leaseState
}

func newLeaseTable(spec Spec, capacity int, id LimitID, b built) (*leaseTable, error) {
	// The eviction test does not depend on the limit or the TTL (a state
	// is recovered when it holds no live lease), so it survives Update.
	var cfg leaseLimit
	t, err := concurrency.NewTable[leaseState](capacity, cfg.recovered)
	if err != nil {
		return nil, err
	}
	return (&leaseKeys{table: t}).limit(spec, id, b), nil
}

// limit returns the Concurrency limit of spec on k's states.
func (k *leaseKeys) limit(spec Spec, id LimitID, b built) *leaseTable {
	return &leaseTable{cfg: leaseLimit{limit: spec.Limit, ttl: int64(spec.LeaseTTL)}, id: id, table: k.table,
		share: spec.Overflow == concurrency.OverflowShare, b: b, spec: spec, keys: k}
}

func (l *leaseTable) decide(h *Hit, now int64, _ time.Duration, out *HitResult) {
	ref, ok := l.table.Get(h.Key, now)
	var st *leaseState
	switch {
	case ok:
		st = ref.Value()
		defer ref.Release()
	case l.share:
		out.Overflow, st = true, &l.keys.shared
	default:
		out.Overflow, out.Decision = true, overflowed(l.cfg.limit, h.Cost, l.b)
		return
	}
	d, id, expires := l.cfg.acquire(st, now, h.Cost, out.Overflow)
	out.Decision = d
	if id != 0 {
		out.Lease = Lease{Limit: l.id, Key: h.Key, ID: id, Cost: h.Cost, Expires: expires}
	}
}

func (l *leaseTable) undo(_ *Hit, now, _ int64, out *HitResult) {
	if out.Lease.Held() {
		// Not held only if it expired at now already: a zero TTL cannot
		// be registered, so this gives the permits back.
		_, _ = l.release(out.Lease, now)
		out.Lease = Lease{}
	}
}

func (l *leaseTable) release(lease Lease, now int64) (bool, error) {
	if lease.ID == 0 {
		return false, nil
	}
	if lease.ID&sharedBit != 0 {
		if !l.share {
			return false, nil
		}
		return l.cfg.release(&l.keys.shared, lease.ID, now), nil
	}
	ref, ok := l.table.Lookup(lease.Key)
	if !ok {
		return false, nil // evicted: it had recovered, every lease expired
	}
	defer ref.Release()
	return l.cfg.release(ref.Value(), lease.ID, now), nil
}

func (l *leaseTable) stats() concurrency.TableStats { return l.table.Stats() }

func (l *leaseTable) registered() Spec { return l.spec }

func (l *leaseTable) prefetch(key string) { l.table.Prefetch(key) }
func (l *leaseTable) prefetches() bool    { return l.table.Prefetches() }
