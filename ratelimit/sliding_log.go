package ratelimit

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/internal/allocsize"
	"github.com/sluicehq/sluice/internal/clock"
)

// SlidingLog is the configuration of an exact sliding-window log: at most
// limit admissions in any interval of length window, for authentication
// endpoints and anything else where the bound must hold exactly.
//
// Per key it keeps the time of each of the last limit admissions in a ring
// (a SlidingLogState). Admissions are numbered by a head counter; admission c
// lives in slot c mod limit. A request of n takes the numbers h..h+n−1 with
// one CAS of the head, and only when the admissions h−limit..h+n−1−limit, the
// ones whose slots it will reuse, lie a whole window before now (or were
// refunded, below). The entries are published after the CAS with a lap
// number; an entry not yet published counts as recent (it is being written
// right now), so a race can only reject, never over-admit.
//
// Guarantee: every admission c lies at least window after admission
// c−limit (or no earlier than it, if that one was refunded), so of any
// limit+1 admissions not refunded two share a slot and lie a window apart:
// no interval of length window holds more than limit, under any
// interleaving and whatever order the callers' now values arrive in. With a
// non-decreasing clock this is exactly the sliding window: a request is
// admitted iff the last window holds at most limit−n admissions. When time
// goes backwards an admission still counts until a window after its own
// time, so going back never opens room.
//
// Cost: a decision reads up to limit entries (to fill Remaining and
// ResetAfter) and takes one CAS. Memory per key: 8 bytes of state plus a
// ring of 16·limit bytes (with a 40-byte header), allocated on the first
// admission. It is meant for small limits (at most MaxSlidingLogLimit).
//
// A state may be used with SlidingLogs of the same window and different
// limits, as when a limit changes in place: the first decision of a
// SlidingLog whose limit is not the ring's rebuilds the ring for its limit,
// keeping the admissions that count (see SlidingLogState).
//
// now must be non-negative and below 2^62+2^61. A SlidingLog is immutable
// and safe for concurrent use. Use NewSlidingLog; the zero value is not
// usable.
type SlidingLog struct {
	limit  int64
	window int64
}

// SlidingLogState is the per-key state of a SlidingLog. Its zero value is
// fresh for any now; the first admission allocates the ring (16·limit
// bytes), every later decision allocates nothing. It must not be copied
// after first use.
//
// It is safe for concurrent use with SlidingLogs of one window, whatever
// their limits. A decision of a SlidingLog whose limit differs from the
// ring's seals the ring (admissions on it stop; decisions racing with the
// rebuild yield until it is done: one pass over each ring), waits for the
// entries being written to be published, and
// replaces it with a ring of its limit (an allocation) that keeps the
// numbering and, for each number the new ring covers, a release time no
// earlier than that of any admission numbered up to it (rebuild). So an
// admission made after the change counts every admission before it: in
// any interval of length window that ends at such an admission there are at
// most the new limit, under any interleaving and order of now values. With
// a non-decreasing clock nothing becomes stricter than the exact sliding
// window either, unless the ring still holds entries of an earlier rebuild
// (fewer admissions than its size since then). A
// refund racing with a rebuild may be lost (stricter, never looser), and
// admissions made before the change can no longer be refunded.
type SlidingLogState struct {
	ring atomic.Pointer[logRing]
}

// logRing is a log of n slots; admission c lives in slot c mod n.
type logRing struct {
	// head counts the admissions numbered so far; logSealed once the ring
	// is being replaced (no admission may take a number on it any more).
	head  atomic.Int64
	n     int64
	slots []logSlot
}

// logSealed is the head of a ring being replaced.
const logSealed = int64(-1)

// logSlot holds one admission. seq is (lap+1)<<1 | refunded, where lap is
// the admission's number divided by the limit; 0 means being written or
// never written. ts is the admission's now.
type logSlot struct {
	seq atomic.Uint64
	ts  atomic.Int64
}

// Reset makes s fresh again, keeping its ring for reuse. It is meant for a
// table that holds the state exclusively; it must not run concurrently with
// any decision on s.
func (s *SlidingLogState) Reset() {
	if r := s.ring.Load(); r != nil {
		r.head.Store(0)
		for i := range r.slots {
			r.slots[i].seq.Store(0)
			r.slots[i].ts.Store(0)
		}
	}
}

// MaxSlidingLogLimit is the largest limit NewSlidingLog accepts: a decision
// reads up to limit entries and a key holds 16·limit bytes, so large limits
// belong to SlidingWindow or GCRA.
const MaxSlidingLogLimit = 1 << 16

// NewSlidingLog returns the configuration of a log admitting at most limit
// in any interval of length window. It returns an error when limit or window
// is not positive, when limit exceeds MaxSlidingLogLimit, or when the window
// is shorter than MinWindow (1 ms) or longer than 2^59 ns (about 18 years).
func NewSlidingLog(limit int64, window time.Duration) (*SlidingLog, error) {
	if err := checkRateLimit("limit", limit); err != nil {
		return nil, err
	}
	if limit > MaxSlidingLogLimit {
		return nil, fmt.Errorf("ratelimit: sliding log limit %d is above the supported %d; use SlidingWindow or GCRA for large limits",
			limit, MaxSlidingLogLimit)
	}
	if err := checkRateWindow(window); err != nil {
		return nil, err
	}
	return &SlidingLog{limit: limit, window: int64(window)}, nil
}

// Limit returns the admissions allowed per window.
func (l *SlidingLog) Limit() int64 { return l.limit }

// KeyBytes returns the memory one key's state holds beyond the
// SlidingLogState itself once it has admitted anything: its ring of Limit
// slots (16 bytes each) and the ring's header, as the allocator rounds
// them (as concurrency.AllocBytes does). A table of such states costs
// KeyBytes per live entry on top of concurrency.TableBytes.
func (l *SlidingLog) KeyBytes() int64 {
	return allocsize.Of(int64(unsafe.Sizeof(logRing{}))) + allocsize.Of(l.limit*int64(unsafe.Sizeof(logSlot{})))
}

// Window returns the window length.
func (l *SlidingLog) Window() time.Duration { return time.Duration(l.window) }

// logPending is the release time given to an entry that is being written: it
// is recent, and its time is at least about now.
const logPending = int64(-1)

// freeAt returns the instant from which admission c no longer counts: its
// time plus the window, or its time if it was refunded; 0 for numbers below
// zero (slots never used); logPending when the entry is not published yet.
func (l *SlidingLog) freeAt(r *logRing, c int64) int64 {
	if c < 0 {
		return 0
	}
	slot := &r.slots[c%r.n]
	want := uint64(c/r.n+1) << 1
	seq := slot.seq.Load()
	if seq&^1 != want {
		return logPending
	}
	ts := slot.ts.Load()
	// Read again: a writer of admission c+limit clears seq before it
	// touches ts, so an unchanged seq means ts belongs to admission c.
	if slot.seq.Load() != seq {
		return logPending
	}
	if seq&1 != 0 {
		return ts
	}
	return ts + l.window
}

// ringFor returns s's ring for this limit: allocated on first use, rebuilt
// when it is of another limit, and never sealed when returned (it may be
// sealed right after).
func (l *SlidingLog) ringFor(s *SlidingLogState) *logRing {
	for {
		r := s.ring.Load()
		switch {
		case r == nil:
			s.ring.CompareAndSwap(nil, &logRing{n: l.limit, slots: make([]logSlot, l.limit)})
		case r.head.Load() == logSealed:
			runtime.Gosched() // another decision is replacing it: a few stores per entry
		case r.n != l.limit:
			l.rebuild(s, r)
		default:
			return r
		}
	}
}

// rebuild replaces r, s's ring of another limit, by a ring of l's limit
// that keeps r's numbering and for every number k it covers holds a release
// time F(k) no earlier than that of any admission numbered k or less: an
// admission reusing k's slot then lies after all of those have stopped
// counting, which is what the guarantee's proof needs (see
// SlidingLogState). It returns at once if another decision admitted on r or
// sealed it first; the caller looks at s again.
//
// The admissions r still holds are lo..h−1 (lo = max(0, h−n) for r's n
// slots). Of those, F(k) takes the latest release time up to k. An older
// admission j < lo is bounded by the admission that reused its slot: j's
// slot was reused by j+n, ..., up to the one that r holds, L(j), and each
// lies no earlier than the release of the one before; so j is bound by the
// time of L(j), and F(k) takes the latest time of L(j) for j ≤ k too.
func (l *SlidingLog) rebuild(s *SlidingLogState, r *logRing) {
	h := r.head.Load()
	if h == logSealed || !r.head.CompareAndSwap(h, logSealed) {
		return
	}
	// No admission takes a number on r any more; those that took one
	// before the seal are publishing their entries.
	n := r.n
	lo := max(0, h-n)
	free := make([]int64, h-lo)  // release time of admission lo+i, then the prefix maximum
	times := make([]int64, h-lo) // its time (the release time of a refunded one)
	for i := range free {
		for {
			ts, refunded, ok := r.entry(lo + int64(i))
			if ok {
				times[i], free[i] = ts, ts
				if !refunded {
					free[i] = ts + l.window // ts ≤ now+window < 2^63 − 2^60: no overflow
				}
				break
			}
			runtime.Gosched() // its writer is between the head CAS and the publish
		}
		if i > 0 {
			free[i] = max(free[i], free[i-1])
		}
	}
	// land returns the index in times of L(j) for j < lo.
	land := func(j int64) int64 { return ((j-lo)%n + n) % n }
	fresh := &logRing{n: l.limit, slots: make([]logSlot, l.limit)}
	first := max(0, h-l.limit)
	// older is the latest time of L(j) over j < lo, j ≤ k; j and j+n land
	// on the same admission, so the first n values of j cover them all.
	var older int64
	for j := int64(0); j <= min(first, lo-1, n-1); j++ {
		older = max(older, times[land(j)])
	}
	for k := first; k < h; k++ {
		if k > first && k < min(lo, n) {
			older = max(older, times[land(k)])
		}
		at := older
		if k >= lo {
			at = max(at, free[k-lo])
		}
		slot := &fresh.slots[k%l.limit]
		slot.ts.Store(at)
		slot.seq.Store(uint64(k/l.limit+1)<<1 | 1) // as refunded: it stops counting at at
	}
	fresh.head.Store(h)
	s.ring.Store(fresh)
}

// entry reads admission c of r: its time, whether it was refunded, and
// false while it is not published.
func (r *logRing) entry(c int64) (ts int64, refunded, ok bool) {
	slot := &r.slots[c%r.n]
	want := uint64(c/r.n+1) << 1
	seq := slot.seq.Load()
	if seq&^1 != want {
		return 0, false, false
	}
	ts = slot.ts.Load()
	if slot.seq.Load() != seq { // refunded meanwhile (or rewritten): read again
		return 0, false, false
	}
	return ts, seq&1 != 0, true
}

// peekRing returns s's ring for reading, rebuilt for this limit if it is of
// another (nil for a fresh state), and its head.
func (l *SlidingLog) peekRing(s *SlidingLogState) (*logRing, int64) {
	if s.ring.Load() == nil {
		return nil, 0
	}
	r := l.ringFor(s)
	return r, max(0, r.head.Load()) // sealed meanwhile: the entries are still r's
}

// AllowN admits n requests at now if the last window leaves room for them,
// and returns the Decision. It never blocks; it allocates only the ring, on
// the first admission of a fresh state.
//
// A rejected request changes nothing; its RetryAfter is exact when no other
// admission is in flight on s (an entry being written counts as one made
// now, so its RetryAfter is the window). n greater than the limit can never
// succeed: ReasonExceedsCapacity with RetryAfter Never. n == 0 admits nothing
// and reports the state; a negative n panics (use Refund).
func (l *SlidingLog) AllowN(s *SlidingLogState, now, n int64) Decision {
	if n <= 0 || n > l.limit {
		if n < 0 {
			panic("ratelimit: SlidingLog.AllowN with negative n")
		}
		r, h := l.peekRing(s)
		d := l.decision(r, h, now)
		if n > 0 {
			d.RetryAfter = Never
		}
		return d
	}
	r := l.ringFor(s)
	for {
		h := r.head.Load()
		if h == logSealed { // being replaced: decide on its successor
			r = l.ringFor(s)
			continue
		}
		// The new admissions h..h+n-1 reuse the slots of h-limit..h+n-1-limit.
		var blockedUntil int64
		for c := h - l.limit; c < h+n-l.limit; c++ {
			at := l.freeAt(r, c)
			if at == logPending {
				at = now + l.window
			}
			blockedUntil = max(blockedUntil, at)
		}
		if blockedUntil > now {
			d := l.decision(r, h, now)
			d.RetryAfter = time.Duration(blockedUntil - now) // > 0: blockedUntil > now
			return d
		}
		// The slots read above can change only after the head passes h, so a
		// successful CAS means they were still free (and the ring was not
		// sealed: sealing changes the head).
		if r.head.CompareAndSwap(h, h+n) {
			for c := h; c < h+n; c++ {
				slot := &r.slots[c%l.limit]
				slot.seq.Store(0) // being written: readers treat it as recent
				slot.ts.Store(now)
				slot.seq.Store(uint64(c/l.limit+1) << 1)
			}
			return l.decision(r, h+n, now)
		}
	}
}

// Refund gives back n admissions made at now or before it: it marks the
// oldest of those that still count at now (up to n) as refunded, so that
// they stop counting (the oldest, so that the slot the next admission
// takes is free at once). now is the instant of the admission refunded:
// for a refund at its own now (a later limit rejected the request) the
// latest instant, and for one that comes later (a rule that counts only
// failures learns that one succeeded) still the admission's, so that it
// marks that admission's entries or older ones, never one made since (an
// older entry stops counting no later than the admission's would). An
// admission whose entries have expired has nothing to give back. It never
// frees more than a fresh state holds. A refund racing with admissions on
// the same key may be lost (the state then stays stricter, never looser).
// Refund(0) does nothing; a negative n panics.
func (l *SlidingLog) Refund(s *SlidingLogState, now, n int64) {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: SlidingLog.Refund with negative n")
		}
		return
	}
	r := s.ring.Load()
	if r == nil {
		return
	}
	h := r.head.Load() // logSealed: the refund is lost to the rebuild
	for c := max(0, h-r.n); c < h && n > 0; c++ {
		slot := &r.slots[c%r.n]
		want := uint64(c/r.n+1) << 1
		if slot.seq.Load() != want { // refunded already, or not published
			continue
		}
		if ts := slot.ts.Load(); ts > now || ts+l.window <= now {
			continue // made since, or no longer counts
		}
		// The CAS fails if the entry was refunded meanwhile or a writer of
		// admission c+limit has started on the slot.
		if slot.seq.CompareAndSwap(want, want|1) {
			n--
		}
	}
}

// Recovered reports whether s is indistinguishable from a fresh state at
// now (no admission counts any more and none is being written), so that a
// table may evict it.
func (l *SlidingLog) Recovered(s *SlidingLogState, now int64) bool {
	r := s.ring.Load()
	if r == nil {
		return true
	}
	h := r.head.Load()
	if h == logSealed {
		return false // being rebuilt
	}
	for c := max(0, h-r.n); c < h; c++ {
		if at := l.freeAt(r, c); at == logPending || at > now {
			return false
		}
	}
	return true
}

// decision reports the state with head h at now: Remaining is the run of
// free slots the next admissions would reuse, ResetAfter the time until
// every one of the last limit admissions stops counting.
func (l *SlidingLog) decision(r *logRing, h, now int64) Decision {
	d := Decision{Limit: l.limit}
	first := h - l.limit
	if first < 0 {
		d.Remaining = -first // slots never used
		first = 0
	}
	counting := true
	var resetAt int64
	for c := first; c < h; c++ {
		at := l.freeAt(r, c)
		if at == logPending {
			at = now + l.window
		}
		if at > now {
			counting = false
			resetAt = max(resetAt, at)
		} else if counting {
			d.Remaining++
		}
	}
	if resetAt > now {
		d.ResetAfter = time.Duration(resetAt - now)
	}
	return d
}

// SlidingLogLimiter is a single sliding-window log: a SlidingLog with its own
// state, for a limit that is not per key. It is safe for concurrent use,
// lock-free, and must not be copied after first use. Use
// NewSlidingLogLimiter; the zero value is not usable.
type SlidingLogLimiter struct {
	_     [cacheLine]byte
	state SlidingLogState
	cfg   SlidingLog
	_     [cacheLine]byte
}

// NewSlidingLogLimiter returns a fresh log admitting at most limit in any
// interval of length window. It returns NewSlidingLog's errors.
func NewSlidingLogLimiter(limit int64, window time.Duration) (*SlidingLogLimiter, error) {
	cfg, err := NewSlidingLog(limit, window)
	if err != nil {
		return nil, err
	}
	return &SlidingLogLimiter{cfg: *cfg}, nil
}

// AllowN admits n requests at now if the last window leaves room; see
// SlidingLog.AllowN.
func (l *SlidingLogLimiter) AllowN(now, n int64) Decision { return l.cfg.AllowN(&l.state, now, n) }

// Allow is shorthand for AllowN(clock.Now(), 1).
func (l *SlidingLogLimiter) Allow() Decision { return l.cfg.AllowN(&l.state, clock.Now(), 1) }

// Refund gives back n admissions; see SlidingLog.Refund.
func (l *SlidingLogLimiter) Refund(now, n int64) { l.cfg.Refund(&l.state, now, n) }
