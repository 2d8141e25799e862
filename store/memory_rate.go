package store

import (
	"fmt"

	"github.com/sluicehq/sluice/concurrency"
)

// rateAlgo is what the concurrency package's rate configurations have in
// common: a decision, a refund and a recovery test on a per-key state S.
type rateAlgo[S any] interface {
	AllowN(s *S, now, n int64) concurrency.Decision
	Refund(s *S, now, n int64)
	Recovered(s *S, now int64) bool
}

// rateLimit is a rate limit of a Memory store: an algorithm and a table of
// its states. The table rejects keys that do not fit; the shared overflow
// state lives here, so that undo and the Overflow flag know where a hit
// was counted.
type rateLimit[S any, P interface {
	*S
	Reset()
}, A rateAlgo[S]] struct {
	algo  A
	table *concurrency.Table[S, P]
	share bool
	limit int64
	b     built
	// shared is OverflowShare's state for keys that do not fit. A key flood
	// writes it from every core: the padding keeps those writes off the
	// line of the read-only fields above, which every decision reads.
	_      [cacheLine]byte
	shared S
}

// cacheLine is the padding unit (as in package concurrency: 128 bytes
// covers adjacent-line prefetching).
const cacheLine = 128

func newRateLimit[S any, P interface {
	*S
	Reset()
}, A rateAlgo[S]](algo A, capacity int, share bool, limit int64, b built) (*rateLimit[S, P, A], error) {
	t, err := concurrency.NewTable[S, P](capacity, algo.Recovered)
	if err != nil {
		return nil, err
	}
	return &rateLimit[S, P, A]{algo: algo, table: t, share: share, limit: limit, b: b}, nil
}

func (r *rateLimit[S, P, A]) decide(h *Hit, now int64, out *HitResult) {
	at := r.b.clock.At(now) // a window limit runs on its calendar's window clock
	r.decideAt(h, at, out)
	out.Decision = r.b.clock.Decision(now, at, out.Decision)
}

func (r *rateLimit[S, P, A]) decideAt(h *Hit, now int64, out *HitResult) {
	ref, ok := r.table.Get(h.Key, now)
	if !ok {
		out.Overflow = true
		if r.share {
			out.Decision = r.algo.AllowN(&r.shared, now, h.Cost)
		} else {
			out.Decision = overflowed(r.limit, h.Cost, r.b)
		}
		return
	}
	out.Decision = r.algo.AllowN(ref.Value(), now, h.Cost)
	ref.Release()
}

func (r *rateLimit[S, P, A]) undo(h *Hit, now int64, out *HitResult) {
	if h.Cost == 0 {
		return
	}
	now = r.b.clock.At(now)
	if out.Overflow {
		if r.share {
			r.algo.Refund(&r.shared, now, h.Cost)
		}
		return
	}
	// Lookup, not Get: an entry that was evicted meanwhile (it recovered)
	// has nothing left to give back, and a fresh one must not be made.
	ref, ok := r.table.Lookup(h.Key)
	if !ok {
		return
	}
	r.algo.Refund(ref.Value(), now, h.Cost)
	ref.Release()
}

func (r *rateLimit[S, P, A]) release(lease Lease, _ int64) (bool, error) {
	return false, fmt.Errorf("store: lease names limit %d, which is not a concurrency limit", lease.Limit)
}

func (r *rateLimit[S, P, A]) stats() concurrency.TableStats { return r.table.Stats() }

// leaseTable is a Concurrency limit of a Memory store.
type leaseTable struct {
	cfg    leaseLimit
	id     LimitID
	table  *concurrency.Table[leaseState, *leaseState]
	share  bool
	b      built
	_      [cacheLine]byte // see rateLimit.shared
	shared leaseState
}

func newLeaseTable(spec Spec, capacity int, share bool, id LimitID, b built) (*leaseTable, error) {
	l := &leaseTable{cfg: leaseLimit{limit: spec.Limit, ttl: int64(spec.LeaseTTL)}, id: id, share: share, b: b}
	t, err := concurrency.NewTable[leaseState](capacity, l.cfg.recovered)
	if err != nil {
		return nil, err
	}
	l.table = t
	return l, nil
}

func (l *leaseTable) decide(h *Hit, now int64, out *HitResult) {
	ref, ok := l.table.Get(h.Key, now)
	var st *leaseState
	switch {
	case ok:
		st = ref.Value()
		defer ref.Release()
	case l.share:
		out.Overflow, st = true, &l.shared
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

func (l *leaseTable) undo(_ *Hit, now int64, out *HitResult) {
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
		return l.cfg.release(&l.shared, lease.ID, now), nil
	}
	ref, ok := l.table.Lookup(lease.Key)
	if !ok {
		return false, nil // evicted: it had recovered, every lease expired
	}
	defer ref.Release()
	return l.cfg.release(ref.Value(), lease.ID, now), nil
}

func (l *leaseTable) stats() concurrency.TableStats { return l.table.Stats() }
