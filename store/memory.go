package store

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
)

// Memory is the in-process Store: one concurrency.Table of per-key state per
// registered limit, each holding at most Spec.Capacity keys and evicting
// only recovered ones.
//
// Rate limits (TokenBucket, FixedWindow, SlidingWindow, SlidingLog) take no
// lock: a decision pins the key's entry and runs the concurrency package's
// lock-free algorithm on it, one CAS loop per hit. Concurrency limits take a
// short lock per key: a lease is several words (ID, expiry, cost, its place
// in the key's expiry-ordered list) that must change together with the
// key's permit count. Deciding a warm key allocates nothing; a
// key's first SlidingLog admission allocates its ring and a key's
// concurrency slots grow with the leases it holds at once.
//
// Memory decides at Request.Now, so the same code runs in real time, in a
// simulation's virtual time and under testing/synctest. It has no
// goroutine: expired leases are reclaimed by the calls that meet them (at
// most Limit leases in one call, amortized O(1) per lease). It never blocks and ignores the contexts it is given; it
// never returns ErrUnavailable.
//
// A Memory is safe for concurrent use; Register, Update and Unregister may
// run concurrently with Decide and Release. The zero value is an empty store
// ready to use; it must not be copied after first use.
type Memory struct {
	mu    sync.Mutex // serializes Register and Unregister
	names map[string]LimitID
	// limits is copied on write, indexed by LimitID-1; an unregistered
	// limit leaves nil (a tombstone, so that IDs are never reused).
	limits atomic.Pointer[[]memLimit]
	// prefetch says that some limit ever registered has a table large
	// enough for Decide to prefetch its hits (concurrency.Table.Prefetches):
	// without one, Decide skips the calls, each of which would do nothing.
	prefetch atomic.Bool
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{} }

// memLimit is one registered limit of a Memory store.
type memLimit interface {
	// decide charges h at now, at an instant no earlier than now+wait if
	// it reserves, and writes its outcome to out: its Decision on every
	// path, the other fields (zeroed, see HitResult.forget) when they
	// apply.
	decide(h *Hit, now int64, wait time.Duration, out *HitResult)
	// undo gives back what decide charged for h at now (out is decide's
	// outcome), at late, the refund's instant: now for the all-or-nothing
	// rollback, later for a refund after the work (a bucket then gives back
	// only what the charge still weighs).
	undo(h *Hit, now, late int64, out *HitResult)
	// release gives a lease back; false when it was not held.
	release(lease Lease, now int64) (bool, error)
	stats() concurrency.TableStats
	// registered returns the spec the limit was registered or last
	// updated with.
	registered() Spec
	// reset makes key fresh (Resetter).
	reset(key string)
	// prefetch asks for the memory that deciding key reads
	// (concurrency.Table.Prefetch), and prefetches reports whether it
	// reads anything (concurrency.Table.Prefetches).
	prefetch(key string)
	prefetches() bool
}

// Register validates spec and adds it. It returns the spec's validation
// errors, and an error when the name is taken.
func (m *Memory) Register(_ context.Context, spec Spec) (LimitID, error) {
	b, err := spec.build()
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.names[spec.Name]; dup {
		return 0, fmt.Errorf("store: limit %q is registered already", spec.Name)
	}
	var old []memLimit
	if p := m.limits.Load(); p != nil {
		old = *p
	}
	if uint64(len(old)) >= math.MaxUint32 {
		return 0, fmt.Errorf("store: too many limits")
	}
	l, err := newMemLimit(spec, b, LimitID(len(old)+1))
	if err != nil {
		return 0, err
	}
	next := append(slices.Clip(old), l)
	if l.prefetches() {
		m.prefetch.Store(true)
	}
	if m.names == nil {
		m.names = make(map[string]LimitID)
	}
	m.names[spec.Name] = LimitID(len(next))
	m.limits.Store(&next)
	return LimitID(len(next)), nil
}

// Unregister drops limit id (see Store): its key table is left to the
// garbage collector once the decisions that loaded it before are done, and
// TableStats of id is zero from now on. It returns an error matching
// ErrUnknownLimit when id is not registered. It copies the store's table of
// limits, one word pair per LimitID ever handed out.
func (m *Memory) Unregister(_ context.Context, id LimitID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lookup(id) == nil {
		return fmt.Errorf("%w: limit %d is not registered", ErrUnknownLimit, id)
	}
	// A Decide that loaded the old table still decides on the limit's
	// state, which the garbage collector keeps alive until it is done.
	next := slices.Clone(*m.limits.Load())
	next[id-1] = nil
	for name, nid := range m.names {
		if nid == id {
			delete(m.names, name)
			break
		}
	}
	m.limits.Store(&next)
	return nil
}

// Limits returns the number of limits registered and not unregistered.
func (m *Memory) Limits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.names)
}

func newMemLimit(spec Spec, b built, id LimitID) (memLimit, error) {
	capacity := spec.Capacity
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	var (
		l   memLimit
		err error
	)
	switch spec.Algorithm {
	case TokenBucket:
		l, err = newRateLimit[ratelimit.GCRAState](b.gcra, capacity, spec, b)
	case FixedWindow:
		// The widest count field the window allows, so that Update can
		// raise the limit without a new state format.
		l, err = newRateLimit[ratelimit.FixedWindowState](b.fixed.Widened(), capacity, spec, b)
	case SlidingWindow:
		l, err = newRateLimit[ratelimit.SlidingWindowState](b.sliding.Widened(), capacity, spec, b)
	case SlidingLog:
		l, err = newRateLimit[ratelimit.SlidingLogState](b.log, capacity, spec, b)
	case Concurrency:
		l, err = newLeaseTable(spec, capacity, id, b)
	}
	if err != nil {
		return nil, fmt.Errorf("store: limit %q: %w", spec.Name, err)
	}
	return l, nil
}

// MemoryBytes returns the most memory a Memory store holds for a limit of
// spec, a worst case with every key of its capacity live and grown at
// once: its preallocated table of Capacity keys (DefaultCapacity when
// zero) of the algorithm's state (concurrency.TableBytes) and a KiB of its
// own structures, plus, for every
// one of those keys and the shared overflow state, what the state
// allocates of its own: a SlidingLog key's ring
// (ratelimit.SlidingLog.KeyBytes: 16·Limit bytes and a header), a
// Concurrency key's lease slots (one per permit held at once, Limit at
// most, and as many again that append may leave spare). The other
// algorithms' states allocate nothing. It returns Validate's error for an
// invalid spec and the table's for a capacity above
// concurrency.MaxTableCapacity, both starting with "store: ".
func (s Spec) MemoryBytes() (int64, error) {
	b, err := s.build()
	if err != nil {
		return 0, err
	}
	capacity := s.Capacity
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	var table, perKey int64
	switch s.Algorithm {
	case TokenBucket:
		table, err = concurrency.TableBytes[ratelimit.GCRAState](capacity)
	case FixedWindow:
		table, err = concurrency.TableBytes[ratelimit.FixedWindowState](capacity)
	case SlidingWindow:
		table, err = concurrency.TableBytes[ratelimit.SlidingWindowState](capacity)
	case SlidingLog:
		table, err = concurrency.TableBytes[ratelimit.SlidingLogState](capacity)
		perKey = b.log.KeyBytes()
	case Concurrency:
		table, err = concurrency.TableBytes[leaseState](capacity)
		perKey = concurrency.AllocBytes(2 * s.Limit * int64(unsafe.Sizeof(leaseSlot{})))
	}
	if err != nil {
		return 0, s.errorf("%w", err)
	}
	// The limit's own structures (its parameters, the keys' shared state
	// and the padding around it, the store's index entries): bounded by
	// a KiB, whatever the algorithm.
	const keysHeader = 8 * cacheLine
	// Bounded: capacity <= 2^24 and perKey <= 2^31 (a sliding log of
	// 2^16 slots, 2^24 leases of 32 bytes twice), so no overflow.
	return table + keysHeader + (int64(capacity)+1)*perKey, nil
}

// lookup returns the registered limit id, or nil (unregistered
// included).
func (m *Memory) lookup(id LimitID) memLimit {
	p := m.limits.Load()
	if p == nil || id == 0 || int(id) > len(*p) {
		return nil
	}
	return (*p)[id-1]
}

// Decide charges req's hits at req.Now, all or nothing (see Store). It
// returns an error, charging nothing, when req is malformed (Request.Check),
// names a limit this store does not hold (ErrUnknownLimit), or has a
// negative Now. It does not allocate for a warm key. A request of several
// hits asks for every hit's entry before deciding the first
// (concurrency.Table.Prefetch), so that on large tables their cache misses
// overlap.
func (m *Memory) Decide(_ context.Context, req *Request, res *Result) error {
	if req == nil || res == nil {
		return fmt.Errorf("store: Decide needs a request and a result")
	}
	p := m.limits.Load()
	var ls []memLimit
	if p != nil {
		ls = *p
	}
	if h := &req.Hits[0]; req.N == 1 && req.Wait == 0 && req.Now >= 0 && h.Cost >= 0 && h.MaxWait == 0 &&
		uint(h.Limit-1) < uint(len(ls)) { // Limit 0 wraps to the largest index
		if b, ok := ls[h.Limit-1].(*bucketLimit); ok {
			// The common request, one token bucket hit, well-formed (as
			// plainRequest checks it), without the loop's bookkeeping: the
			// result the loop would write.
			out := &res.Hits[0]
			out.forget()
			decideBucket(b, h, req.Now, out)
			res.Allowed, res.Decider, res.N, res.Now, res.Wait = out.Decision.Allowed(), 0, 1, req.Now, 0
			return nil
		}
	}
	plain := plainRequest(req, ls)
	if !plain {
		if err := checkRequest(req, ls); err != nil {
			return err
		}
	}
	now, wait := req.Now, req.Wait
	hits := req.Hits[:req.N]
	if len(hits) > 1 && m.prefetch.Load() {
		// Ask for every hit's entry before deciding the first, so that
		// the cache misses of large tables overlap.
		for i := range hits {
			ls[hits[i].Limit-1].prefetch(hits[i].Key)
		}
	}
	res.Allowed, res.Decider, res.Now, res.Wait = true, 0, now, 0
	for i := range hits {
		h, out := &hits[i], &res.Hits[i]
		out.forget()
		l, w := ls[h.Limit-1], max(wait, res.Wait)
		if b, ok := l.(*bucketLimit); ok && plain && w == 0 {
			decideBucket(b, h, now, out) // the common limit, without the generic dispatch; no wait
		} else {
			l.decide(h, now, w, out)
			res.Wait = max(res.Wait, out.Wait)
		}
		if !out.Decision.Allowed() {
			// All or nothing: give back what the earlier hits took, latest
			// first.
			for j := i - 1; j >= 0; j-- {
				ls[hits[j].Limit-1].undo(&hits[j], now, now, &res.Hits[j])
			}
			res.Allowed, res.Decider, res.N, res.Wait = false, i, i+1, 0
			return nil
		}
		if i > 0 && out.Decision.Remaining < res.Hits[res.Decider].Decision.Remaining {
			res.Decider = i
		}
	}
	res.N = req.N
	return nil
}

// plainRequest reports, in one pass, whether req is a request that
// checkRequest accepts with no max wait: well-formed, at a Now that is not
// negative, every hit naming a limit of ls. The others go through
// checkRequest, for its errors.
func plainRequest(req *Request, ls []memLimit) bool {
	if req.N < 1 || req.N > MaxHits || req.Now < 0 || req.Wait < 0 || req.Wait > ratelimit.MaxReserveWait {
		return false
	}
	for i := range req.Hits[:req.N] {
		h := &req.Hits[i]
		// Limit 0 wraps to the largest index: no limit of ls.
		if uint(h.Limit-1) >= uint(len(ls)) || ls[h.Limit-1] == nil || h.Cost < 0 || h.MaxWait != 0 {
			return false
		}
	}
	return true
}

// checkRequest returns Decide's error for req on limits ls, nil when
// Decide may charge it.
func checkRequest(req *Request, ls []memLimit) error {
	if err := req.Check(); err != nil {
		return err
	}
	if req.Now < 0 {
		return fmt.Errorf("store: negative now %d", req.Now)
	}
	hits := req.Hits[:req.N]
	for i := range hits {
		if id := hits[i].Limit; int(id) > len(ls) || ls[id-1] == nil {
			return fmt.Errorf("%w: hit %d names limit %d", ErrUnknownLimit, i, id)
		}
		if hits[i].MaxWait > 0 {
			if err := CheckReserve(ls[hits[i].Limit-1].registered()); err != nil {
				return fmt.Errorf("store: hit %d: %w", i, err)
			}
		}
	}
	return nil
}

// Release gives lease back at now. It returns ErrLeaseNotHeld when the
// lease is not held (released already, expired at or before now, or not
// from this store), an error matching ErrUnknownLimit when its limit is
// unknown, and an error when that is not a Concurrency limit.
func (m *Memory) Release(_ context.Context, lease Lease, now int64) error {
	if !lease.Held() {
		return ErrLeaseNotHeld
	}
	l := m.lookup(lease.Limit)
	if l == nil {
		return fmt.Errorf("%w: lease names limit %d", ErrUnknownLimit, lease.Limit)
	}
	held, err := l.release(lease, now)
	if err != nil {
		return err
	}
	if !held {
		return ErrLeaseNotHeld
	}
	return nil
}

// Prefetch reads, and discards, the memory that deciding key on limit id
// will read first (concurrency.Table.Prefetch): a caller with other work
// to do before its Decide (a penalty check) calls it first, so that the
// two cache misses overlap. It does nothing for an unknown limit or a
// table of under 4 MiB of buckets. Safe for concurrent use; it allocates
// nothing.
func (m *Memory) Prefetch(id LimitID, key string) {
	if l := m.lookup(id); l != nil {
		l.prefetch(key)
	}
}

// TableStats returns the key table counters of limit id (entries, capacity,
// evictions, overflows); the zero TableStats for an unknown or
// unregistered id.
func (m *Memory) TableStats(id LimitID) concurrency.TableStats {
	l := m.lookup(id)
	if l == nil {
		return concurrency.TableStats{}
	}
	return l.stats()
}

// overflowed is the decision for a key that does not fit a full table under
// OverflowReject: a rejection whose RetryAfter is a hint (the longest an
// untouched state takes to recover). A peek (cost 0) is answered as for a
// fresh key.
func overflowed(limit, cost int64, b built) ratelimit.Decision {
	if cost == 0 {
		return ratelimit.Decision{Limit: limit, Remaining: limit}
	}
	return ratelimit.Decision{
		Limit:      limit,
		RetryAfter: max(1, b.recoverAfter),
		ResetAfter: b.recoverAfter,
	}
}
