package concurrency

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/shard"
)

// cacheLine is the padding unit that keeps hot atomics of different
// structures off each other's cache lines (128 covers adjacent-line
// prefetching on x86 and the 128-byte lines of some arm64 parts).
const cacheLine = shard.CacheLine

// Semaphore bounds weighted inflight work. TryAcquire admits n units when
// inflight+n stays within the limit; Release gives them back. The bound is
// exact under any interleaving: inflight never exceeds the limit in force at
// the moment of each acquisition.
//
// The admit path is one atomic load of the limit and one CAS loop on the
// inflight counter: no lock, no allocation. A Semaphore is safe for
// concurrent use and must not be copied after first use. The zero value is
// not usable; call NewSemaphore.
type Semaphore struct {
	_        [cacheLine]byte
	inflight atomic.Int64
	limit    atomic.Int64
	// onCapacity is read on Release and SetLimit only: one load when there
	// is no hook, two when a gated hook finds nobody waiting.
	onCapacity hookSlot
	_          [cacheLine]byte
}

// MaxSemaphoreLimit is the largest limit NewSemaphore, NewShardedSemaphore
// and their SetLimit accept (2^32 units). It is what keeps the one-XADD
// admit path exact: a request of more than MaxSemaphoreLimit units can
// never fit and is refused without touching the counter, so the units
// added optimistically at one instant are at most 2^32 per goroutine, and
// with fewer than 2^31 goroutines (each has a stack of 2 KiB at least) the
// true sum of inflight and those transient units stays below 2^64: the
// word can wrap only into its negative half, which the admit path's
// unsigned comparison reads as over the limit.
const MaxSemaphoreLimit = 1 << 32

// checkSemaphoreLimit validates a semaphore limit for the constructors and
// SetLimit.
func checkSemaphoreLimit(limit int64) error {
	if limit <= 0 {
		return fmt.Errorf("concurrency: semaphore limit must be positive, got %d", limit)
	}
	if limit > MaxSemaphoreLimit {
		return fmt.Errorf("concurrency: semaphore limit %d is above the supported %d", limit, int64(MaxSemaphoreLimit))
	}
	return nil
}

// NewSemaphore returns a Semaphore that admits up to limit units at once.
// It returns an error when limit is not positive or is above
// MaxSemaphoreLimit.
func NewSemaphore(limit int64) (*Semaphore, error) {
	if err := checkSemaphoreLimit(limit); err != nil {
		return nil, err
	}
	s := &Semaphore{}
	s.limit.Store(limit)
	return s, nil
}

// TryAcquire admits n units if inflight+n <= Limit and reports whether it
// did. It never blocks. A request above the limit is refused whatever its
// size (up to math.MaxInt64): no n can make the counter wrap. TryAcquire(0)
// admits nothing and returns true. It panics when n is negative: that would
// be a release in disguise.
func (s *Semaphore) TryAcquire(n int64) bool {
	if n <= 0 {
		if n < 0 {
			panic("concurrency: Semaphore.TryAcquire with negative n")
		}
		return true
	}
	if n > MaxSemaphoreLimit {
		return false // above any limit; never added, so it cannot wrap the word
	}
	// Optimistic add, undone on overshoot: one XADD instead of a CAS loop
	// that retries under contention. The bound stays exact (a caller is
	// admitted only when the sum including its own n is within the limit);
	// the price is that a concurrent caller may see the transient overshoot
	// and be rejected although it would have fitted an instant later. The
	// comparison is unsigned: a word wrapped by transient units reads as
	// above 2^63, over any limit (see MaxSemaphoreLimit).
	if uint64(s.inflight.Add(n)) <= uint64(s.limit.Load()) {
		return true
	}
	s.inflight.Add(-n)
	return false
}

// Release gives back n units acquired earlier. Releasing more than is held
// is a programmer error and panics; the counter is left unchanged then.
// Release(0) does nothing.
func (s *Semaphore) Release(n int64) {
	if n <= 0 {
		if n < 0 {
			panic("concurrency: Semaphore.Release with negative n")
		}
		return
	}
	if n > MaxSemaphoreLimit {
		// More than any limit, so more than is held; not subtracted, so
		// that a huge n cannot wrap the word either way.
		panic(fmt.Sprintf("concurrency: Semaphore.Release(%d) releases more than any limit", n))
	}
	if after := s.inflight.Add(-n); after < 0 {
		s.inflight.Add(n)
		panic(fmt.Sprintf("concurrency: Semaphore.Release(%d) releases more than is held (%d)", n, after+n))
	}
	if g := s.onCapacity.gate.Load(); g != nil && g.Load() != 0 {
		s.onCapacity.run()
	}
}

// SetLimit changes the limit. Shrinking never revokes permits already held:
// it only stops new admissions until inflight falls under the new limit.
// It returns an error when limit is not positive or is above
// MaxSemaphoreLimit, and leaves the limit unchanged then.
func (s *Semaphore) SetLimit(limit int64) error {
	if err := checkSemaphoreLimit(limit); err != nil {
		return err
	}
	if old := s.limit.Swap(limit); limit > old {
		if g := s.onCapacity.gate.Load(); g != nil && g.Load() != 0 {
			s.onCapacity.run()
		}
	}
	return nil
}

// Limit returns the current limit.
func (s *Semaphore) Limit() int64 { return s.limit.Load() }

// Inflight returns the units currently held. While callers acquire
// concurrently it may also count, for an instant, the units of an attempt
// being turned away (TryAcquire adds them before it checks the limit), so
// that it can read above the limit then; a quiet semaphore's is exact.
func (s *Semaphore) Inflight() int64 { return s.inflight.Load() }

// Available returns how many units TryAcquire could admit right now; it is
// zero while inflight is at or above the limit.
func (s *Semaphore) Available() int64 {
	cur, limit := s.inflight.Load(), s.limit.Load()
	if cur < 0 || cur >= limit { // cur < 0: wrapped by transient units
		return 0
	}
	return limit - cur
}

// OnCapacity registers f to be called after every Release and every SetLimit
// that raises the limit, that is whenever capacity may have freed up. It is
// the hook a waiting discipline uses to wake its waiters. f runs on the
// releasing goroutine and must be quick and must not block; it may call
// TryAcquire. OnCapacity(nil) removes the hook (either kind). A second
// non-nil hook, of either kind, is refused with ErrHookInUse, so that two
// waiting disciplines cannot silently share one semaphore.
func (s *Semaphore) OnCapacity(f func()) error {
	return s.onCapacity.register(f, nil)
}

// OnCapacityWhile registers f like OnCapacity, gated by waiting: after a
// Release or a limit increase f is called only if *waiting, read then, is not
// zero. It is for a waiting discipline that counts its waiters in *waiting,
// so that a release with nobody waiting costs one more load instead of a
// call. No freed capacity is missed if the discipline raises *waiting before
// the last TryAcquire a waiter makes before it blocks: either that TryAcquire
// sees the units, or the release that frees them comes later and sees
// *waiting raised (sync/atomic operations are sequentially consistent).
// OnCapacityWhile(w, nil) removes the hook; a second hook is refused with
// ErrHookInUse.
func (s *Semaphore) OnCapacityWhile(waiting *atomic.Int64, f func()) error {
	return s.onCapacity.register(f, waiting)
}

// ErrHookInUse is returned by OnCapacity and OnCapacityWhile when a hook is
// already registered.
var ErrHookInUse = errors.New("concurrency: a capacity hook is already registered")
