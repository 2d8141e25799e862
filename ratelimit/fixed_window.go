package ratelimit

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// FixedWindow is the configuration of a fixed-window counter: at most limit
// admissions in each window [k·window, (k+1)·window) of absolute time. Its
// per-key state is one word, a FixedWindowState, and every decision is one
// load and one compare-and-swap on it.
//
// Guarantee: never more than limit inside one aligned window. Across a
// boundary it admits up to 2·limit in an interval of length window (limit at
// the end of one window, limit at the start of the next): never use it for
// authentication endpoints; use SlidingLog there.
//
// The state packs the window index (now/window, counted from time 0) and the
// count into one uint64: bits.Len(limit) bits of count, the rest for the
// index. NewFixedWindow accepts only windows whose index for any int64 now
// fits, so the index never wraps and an old state is never mistaken for the
// current window: a window of at least 2^(bits.Len(limit)-1) ns. Below a
// limit of 2^20 that is less than MinWindow (1 ms), the shortest window of
// any limit; from there on it is about 1 ms up to 2^21-1, 0.5 s up to
// 2^30-1.
//
// now must be non-negative and below 2^62+2^61. A request whose now falls in
// an earlier window than the state's (time went backwards across a boundary)
// is rejected, so going back never opens room.
//
// A FixedWindow is immutable and safe for concurrent use. Use
// NewFixedWindow; the zero value is not usable.
type FixedWindow struct {
	limit  int64
	window int64
	shift  uint    // bits of count
	mask   uint64  // 1<<shift - 1
	index  divider // now/window
}

// FixedWindowState is the per-key state of a FixedWindow: 8 bytes. Its zero
// value is fresh for any now. It is safe for concurrent use with one
// FixedWindow and must not be copied after first use.
type FixedWindowState struct {
	w atomic.Uint64 // index<<shift | count
}

// Reset makes s fresh again. It is meant for a table that holds the state
// exclusively; a concurrent decision may be lost.
func (s *FixedWindowState) Reset() { s.w.Store(0) }

// NewFixedWindow returns the configuration of a counter admitting limit per
// window. It returns an error when limit or window is not positive, when the
// window is shorter than MinWindow (1 ms) or longer than 2^59 ns (about 18
// years), or when the window is too short for the limit to share one word
// with the window index (see FixedWindow).
func NewFixedWindow(limit int64, window time.Duration) (*FixedWindow, error) {
	if err := checkRateLimit("limit", limit); err != nil {
		return nil, err
	}
	if err := checkRateWindow(window); err != nil {
		return nil, err
	}
	shift := uint(bits.Len64(uint64(limit)))
	if math.MaxInt64/uint64(window)>>(64-shift) != 0 {
		return nil, fmt.Errorf("ratelimit: a fixed window of %v cannot count to %d in one word; use a window of at least %v",
			window, limit, time.Duration(1)<<(shift-1))
	}
	return &FixedWindow{limit: limit, window: int64(window), shift: shift, mask: 1<<shift - 1,
		index: newDivider(int64(window))}, nil
}

// Limit returns the admissions allowed per window.
func (f *FixedWindow) Limit() int64 { return f.limit }

// Window returns the window length.
func (f *FixedWindow) Window() time.Duration { return time.Duration(f.window) }

// AllowN admits n requests at now if the current window has room for them,
// and returns the Decision. It never blocks and does not allocate.
//
// A rejected request changes nothing; its RetryAfter is exact (the start of
// the window where it fits). n greater than the limit can never succeed:
// ReasonExceedsCapacity with RetryAfter Never. n == 0 admits nothing and
// reports the state; a negative n panics (use Refund).
func (f *FixedWindow) AllowN(s *FixedWindowState, now, n int64) Decision {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: FixedWindow.AllowN with negative n")
		}
		idx, cnt, back := f.view(s.w.Load(), now)
		return f.decision(idx, cnt, back, now)
	}
	for {
		old := s.w.Load()
		idx, cnt, back := f.view(old, now)
		if n > f.limit || back || cnt+n > f.limit {
			d := f.decision(idx, cnt, back, now)
			switch {
			case n > f.limit:
				d.RetryAfter = Never
			case back && cnt+n <= f.limit:
				// back: now is before window idx starts, so the wait is > 0.
				d.RetryAfter = time.Duration(idx*f.window - now)
			default:
				d.RetryAfter = time.Duration((idx+1)*f.window - now)
			}
			return d
		}
		// One CAS moves the window and counts the request together, so a
		// stale window can never be counted into.
		if s.w.CompareAndSwap(old, uint64(idx)<<f.shift|uint64(cnt+n)) {
			return f.decision(idx, cnt+n, false, now)
		}
	}
}

// Refund gives back n admissions made at instant at (the admitting
// decision's now, not the time of the refund), to the window that counted
// them; the count never goes below zero. Once the state counts a later
// window (the window has passed, or reservations are pending there, see
// ReserveN) Refund does nothing: that window did not count them, and its
// own count must not shrink. Refund(0) does nothing; a negative n panics.
func (f *FixedWindow) Refund(s *FixedWindowState, at, n int64) {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: FixedWindow.Refund with negative n")
		}
		return
	}
	for {
		old := s.w.Load()
		idx, cnt := int64(old>>f.shift), int64(old&f.mask)
		if f.index.div(at) != idx || cnt == 0 {
			return // not the window that counted them
		}
		if s.w.CompareAndSwap(old, uint64(idx)<<f.shift|uint64(cnt-min(n, cnt))) {
			return
		}
	}
}

// Recovered reports whether s is indistinguishable from a fresh state at
// now, so that a table may evict it.
func (f *FixedWindow) Recovered(s *FixedWindowState, now int64) bool {
	_, cnt, back := f.view(s.w.Load(), now)
	return !back && cnt == 0
}

// view returns the window that governs a request at now, its count, and
// whether now lies before it (time went backwards across a boundary).
func (f *FixedWindow) view(w uint64, now int64) (idx, cnt int64, back bool) {
	idx, cnt = int64(w>>f.shift), int64(w&f.mask)
	switch cur := f.index.div(now); {
	case cur > idx:
		return cur, 0, false
	case cur < idx:
		return idx, cnt, true
	}
	return idx, cnt, false
}

func (f *FixedWindow) decision(idx, cnt int64, back bool, now int64) Decision {
	d := Decision{Limit: f.limit}
	if !back {
		d.Remaining = max(0, f.limit-cnt) // a count over a lowered limit (WithLimit) leaves none
	}
	switch {
	case cnt > 0:
		d.ResetAfter = time.Duration((idx+1)*f.window - now)
	case back:
		d.ResetAfter = time.Duration(idx*f.window - now)
	}
	return d
}

// FixedWindowLimiter is a single fixed-window counter: a FixedWindow with its
// own state, for a limit that is not per key. It is safe for concurrent use,
// lock-free, and must not be copied after first use. Use
// NewFixedWindowLimiter; the zero value is not usable.
type FixedWindowLimiter struct {
	_     [cacheLine]byte
	state FixedWindowState
	cfg   FixedWindow
	_     [cacheLine]byte
}

// NewFixedWindowLimiter returns a fresh counter of limit per window. It
// returns NewFixedWindow's errors.
func NewFixedWindowLimiter(limit int64, window time.Duration) (*FixedWindowLimiter, error) {
	f, err := NewFixedWindow(limit, window)
	if err != nil {
		return nil, err
	}
	return &FixedWindowLimiter{cfg: *f}, nil
}

// AllowN admits n requests at now if the window has room; see
// FixedWindow.AllowN.
func (l *FixedWindowLimiter) AllowN(now, n int64) Decision { return l.cfg.AllowN(&l.state, now, n) }

// Allow is shorthand for AllowN(clock.Now(), 1).
func (l *FixedWindowLimiter) Allow() Decision { return l.cfg.AllowN(&l.state, clock.Now(), 1) }

// Refund gives back n admissions made at instant at; see FixedWindow.Refund.
func (l *FixedWindowLimiter) Refund(at, n int64) { l.cfg.Refund(&l.state, at, n) }
