package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// MaxTopKeys is the most keys one TopKeys call reports.
const MaxTopKeys = 1000

// KeyUse is one key's use of a limit at one instant, as TopKeys reports
// it. It names the key by its hash only: a store keeps no raw key it can
// report (Memory keeps none at all).
type KeyUse struct {
	// Hash is the key's 64-bit hash in the limit's table, keyed with the
	// table's secret random seed: the same key has another hash in another
	// limit and in another process. ResetHash takes it back.
	Hash uint64
	// Used is what the key holds of the limit: Limit - Remaining (the
	// tokens taken and not yet refilled, the window's count, the permits
	// of live leases).
	Used, Limit, Remaining int64
	// ResetAfter is the time until the key is whole again.
	ResetAfter time.Duration
}

// KeyLister is a Store that can report the keys of a limit that use the
// most of it, and forget one of them by its hash: what a status page shows
// and acts on. Callers find it with a type assertion (s.(store.KeyLister)):
// Memory is one; redisstore is not (listing the keys of a shared Redis
// would be a SCAN of its key space per call, and Redis keeps raw keys).
type KeyLister interface {
	// TopKeys returns, at now, at most n keys of limit id that hold part
	// of it (Used > 0), most used first (ties: the longest ResetAfter
	// first). It returns an error for n outside [1, MaxTopKeys] and one
	// matching ErrUnknownLimit when id is not registered.
	TopKeys(id LimitID, n int, now int64) ([]KeyUse, error)
	// ResetHash is Resetter's Reset for the key of that hash (KeyUse.Hash);
	// a hash no key has is no error.
	ResetHash(ctx context.Context, id LimitID, hash uint64) error
}

var _ KeyLister = (*Memory)(nil)

// keyLister is what Memory's limits offer to TopKeys and ResetHash.
type keyLister interface {
	top(now int64, keep func(KeyUse))
	resetHash(hash uint64)
}

// TopKeys reports the most used keys of limit id (see KeyLister). It reads
// every slot of the limit's table (concurrency.Table.Range), each entry
// pinned for the read and none changed, so it takes time in proportion to
// the limit's capacity (about 1.6 ms for a token bucket limit of the
// default capacity, half full: BenchmarkTopKeys on a 2-core machine) and
// costs the limit's decisions nothing but the pins' cache lines; it
// allocates the result. The report is not a snapshot of one
// instant: keys that change meanwhile are seen before or after.
func (m *Memory) TopKeys(id LimitID, n int, now int64) ([]KeyUse, error) {
	if n < 1 || n > MaxTopKeys {
		return nil, fmt.Errorf("store: TopKeys of %d keys: want 1 to %d", n, MaxTopKeys)
	}
	l := m.lookup(id)
	if l == nil {
		return nil, fmt.Errorf("%w: limit %d is not registered", ErrUnknownLimit, id)
	}
	lst, ok := l.(keyLister)
	if !ok {
		return nil, fmt.Errorf("store: limit %d cannot list its keys", id)
	}
	top := make([]KeyUse, 0, n)
	lst.top(now, func(u KeyUse) {
		if u.Used <= 0 {
			return
		}
		if len(top) == n {
			if !hotter(u, top[n-1]) {
				return
			}
			top = top[:n-1]
		}
		// Insertion keeps top sorted: n is small, the scan is the cost.
		i, _ := slices.BinarySearchFunc(top, u, func(a, b KeyUse) int {
			if hotter(a, b) {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, u)
	})
	return top, nil
}

// hotter reports whether a ranks before b: more used, then the longer
// wait to be whole.
func hotter(a, b KeyUse) bool {
	if a.Used != b.Used {
		return a.Used > b.Used
	}
	return a.ResetAfter > b.ResetAfter
}

// ResetHash forgets the key of hash of limit id (see KeyLister).
func (m *Memory) ResetHash(_ context.Context, id LimitID, hash uint64) error {
	l := m.lookup(id)
	if l == nil {
		return fmt.Errorf("%w: limit %d is not registered", ErrUnknownLimit, id)
	}
	lst, ok := l.(keyLister)
	if !ok {
		return fmt.Errorf("store: limit %d cannot reset a key by hash", id)
	}
	lst.resetHash(hash)
	return nil
}

func (r *rateLimit[S, P, A]) top(now int64, keep func(KeyUse)) {
	at := r.b.clock.At(now)
	r.table.Range(func(h uint64, s *S) bool {
		d := r.b.clock.Decision(now, at, r.algo.AllowN(s, at, 0)) // a peek: takes nothing
		keep(KeyUse{Hash: h, Used: d.Limit - d.Remaining, Limit: d.Limit, Remaining: d.Remaining, ResetAfter: d.ResetAfter})
		return true
	})
}

func (r *rateLimit[S, P, A]) resetHash(hash uint64) {
	if ref, ok := r.table.LookupHash(hash); ok {
		P(ref.Value()).Reset()
		ref.Release()
	}
}

func (l *leaseTable) top(now int64, keep func(KeyUse)) {
	l.table.Range(func(h uint64, s *leaseState) bool {
		d, _, _ := l.cfg.acquire(s, now, 0, false) // a peek, after reclaiming expired leases
		keep(KeyUse{Hash: h, Used: d.Limit - d.Remaining, Limit: d.Limit, Remaining: d.Remaining, ResetAfter: d.ResetAfter})
		return true
	})
}

func (l *leaseTable) resetHash(hash uint64) {
	if ref, ok := l.table.LookupHash(hash); ok {
		ref.Value().Reset()
		ref.Release()
	}
}
