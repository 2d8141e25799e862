package ratelimit

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// SlidingWindow is the configuration of a sliding-window counter: it keeps
// the counts of the current aligned window [k·window, (k+1)·window) and of
// the previous one, and estimates the count of the last window of time as
//
//	estimate(now) = cur + ⌈prev·(window−e)/window⌉,  e = now − k·window,
//
// admitting n when estimate+n ≤ limit. Its per-key state is one word, a
// SlidingWindowState, and every decision is one load and one CAS on it.
//
// Error bound (approximate algorithm). The estimate assumes the previous
// window's admissions were spread evenly over it. In every aligned window it
// admits at most limit. In an arbitrary interval of length window it admits
// at most limit + ⌊limit·(window−1)/window⌋ ≤ 2·limit−1: the interval
// (t−window, t] with t = k·window+e holds at most P admissions of the previous
// window (P ≤ limit) and, by the admission rule at its last admission, at
// most limit − P·(window−e)/window of the current one, so at most
// limit + P·e/window in all. The worst case needs the previous window's whole
// limit packed into its last instants; with evenly spread traffic the error
// vanishes (Cloudflare measured 0.003% wrong decisions on real traffic). It
// is never exact: use SlidingLog where the bound must be limit.
//
// The state packs the window index (now/window, from time 0) and both counts
// into one uint64: bits.Len(limit) bits per count, the rest for the index.
// NewSlidingWindow accepts only windows whose index for any int64 now fits,
// so the index never wraps and an old state is never mistaken for the
// current window: a window of at least 2^(2·bits.Len(limit)−1) ns. Up to a
// limit of 1,023 that is less than MinWindow (1 ms), the shortest window of
// any limit; from there on it is about 2.1 ms up to 2,047, 134 ms up to
// 16,383, 2.1 s up to 65,535, 9.2 min up to 2^20−1.
//
// now must be non-negative and below 2^62+2^61. A request whose now falls in
// an earlier window than the state's (time went backwards across a boundary)
// is rejected, so going back never opens room.
//
// A SlidingWindow is immutable and safe for concurrent use. Use
// NewSlidingWindow; the zero value is not usable.
type SlidingWindow struct {
	limit  int64
	window int64
	shift  uint    // bits per count
	mask   uint64  // 1<<shift - 1
	index  divider // now/window
}

// SlidingWindowState is the per-key state of a SlidingWindow: 8 bytes. Its
// zero value is fresh for any now. It is safe for concurrent use with one
// SlidingWindow and must not be copied after first use.
type SlidingWindowState struct {
	w atomic.Uint64 // index<<(2·shift) | cur<<shift | prev
}

// Reset makes s fresh again. It is meant for a table that holds the state
// exclusively; a concurrent decision may be lost.
func (s *SlidingWindowState) Reset() { s.w.Store(0) }

// NewSlidingWindow returns the configuration of a sliding-window counter of
// limit per window. It returns an error when limit or window is not
// positive, when the window is shorter than MinWindow (1 ms) or longer than
// 2^59 ns (about 18 years), or when the window is too short for two counts
// to share one word with the window index (see SlidingWindow).
func NewSlidingWindow(limit int64, window time.Duration) (*SlidingWindow, error) {
	if err := checkRateLimit("limit", limit); err != nil {
		return nil, err
	}
	if err := checkRateWindow(window); err != nil {
		return nil, err
	}
	shift := uint(bits.Len64(uint64(limit)))
	if 2*shift >= 64 || math.MaxInt64/uint64(window)>>(64-2*shift) != 0 {
		minWindow := "a longer window"
		if 2*shift < 64 {
			minWindow = "a window of at least " + time.Duration(int64(1)<<(2*shift-1)).String()
		}
		return nil, fmt.Errorf("ratelimit: a sliding window of %v cannot count to %d in one word; use %s",
			window, limit, minWindow)
	}
	return &SlidingWindow{limit: limit, window: int64(window), shift: shift, mask: 1<<shift - 1,
		index: newDivider(int64(window))}, nil
}

// Limit returns the admissions allowed per window.
func (sw *SlidingWindow) Limit() int64 { return sw.limit }

// Window returns the window length.
func (sw *SlidingWindow) Window() time.Duration { return time.Duration(sw.window) }

// swView is the state as it governs a request at now.
type swView struct {
	idx, cur, prev int64
	back           bool  // now lies before window idx
	e              int64 // now's offset into window idx (0 when back)
}

func (sw *SlidingWindow) view(w uint64, now int64) swView {
	v := swView{
		idx:  int64(w >> (2 * sw.shift)),
		cur:  int64(w >> sw.shift & sw.mask),
		prev: int64(w & sw.mask),
	}
	switch nowIdx := sw.index.div(now); {
	case nowIdx < v.idx:
		v.back = true
		return v
	case nowIdx == v.idx+1:
		v.idx, v.cur, v.prev = nowIdx, 0, v.cur
	case nowIdx > v.idx+1:
		v.idx, v.cur, v.prev = nowIdx, 0, 0
	}
	v.e = now - v.idx*sw.window
	return v
}

func (sw *SlidingWindow) pack(v swView) uint64 {
	return uint64(v.idx)<<(2*sw.shift) | uint64(v.cur)<<sw.shift | uint64(v.prev)
}

// weighted returns ⌈prev·(window−e)/window⌉ without overflow.
func (sw *SlidingWindow) weighted(prev, e int64) int64 {
	if prev == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(prev), uint64(sw.window-e))
	q, r := bits.Div64(hi, lo, uint64(sw.window)) // hi < window since prev·(window−e) < 2^64·window
	if r != 0 {
		q++
	}
	return int64(q)
}

// AllowN admits n requests at now if the estimate leaves room for them, and
// returns the Decision. It never blocks and does not allocate.
//
// A rejected request changes nothing; its RetryAfter is exact for the
// estimate: the same request at now+RetryAfter is admitted if nothing else
// happened in between, and at any earlier instant it is not. n greater than
// the limit can never succeed: ReasonExceedsCapacity with RetryAfter Never.
// n == 0 admits nothing and reports the state; a negative n panics (use
// Refund).
func (sw *SlidingWindow) AllowN(s *SlidingWindowState, now, n int64) Decision {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: SlidingWindow.AllowN with negative n")
		}
		return sw.decision(sw.view(s.w.Load(), now), now)
	}
	for {
		old := s.w.Load()
		v := sw.view(old, now)
		if n > sw.limit || v.back || v.cur+n+sw.weighted(v.prev, v.e) > sw.limit {
			d := sw.decision(v, now)
			if n > sw.limit {
				d.RetryAfter = Never
			} else {
				// earliest is exact and the request does not fit at now, so
				// the wait is > 0; at least 1 ns guards the encoding of a
				// rejection (Decision.Allowed is RetryAfter == 0).
				d.RetryAfter = time.Duration(max(1, sw.earliest(v, n)-now))
			}
			return d
		}
		v.cur += n
		// One CAS rolls the windows and counts the request together.
		if s.w.CompareAndSwap(old, sw.pack(v)) {
			return sw.decision(v, now)
		}
	}
}

// earliest returns the first instant, at or after the start of window v.idx
// and at or after v.e into it, at which n (1 ≤ n ≤ limit) fits if nothing
// else happens. The estimate only falls as time passes, so that instant is
// exact.
func (sw *SlidingWindow) earliest(v swView, n int64) int64 {
	// In window v.idx at offset e ≥ v.e: ⌈prev·(W−e)/W⌉ ≤ R ⟺ e ≥ W − ⌊R·W/prev⌋.
	if r := sw.limit - v.cur - n; r >= 0 {
		if e := max(v.e, sw.window-sw.share(r, v.prev)); e < sw.window {
			return v.idx*sw.window + e
		}
	}
	// In window v.idx+1 the current count becomes the previous one.
	if e := sw.window - sw.share(sw.limit-n, v.cur); e < sw.window {
		return (v.idx+1)*sw.window + max(0, e)
	}
	// Window v.idx+2 starts empty, and n ≤ limit.
	return (v.idx + 2) * sw.window
}

// share returns ⌊r·W/prev⌋, capped at W (r ≥ prev: the whole window); for
// prev == 0 it returns W.
func (sw *SlidingWindow) share(r, prev int64) int64 {
	if r >= prev {
		return sw.window
	}
	hi, lo := bits.Mul64(uint64(r), uint64(sw.window))
	q, _ := bits.Div64(hi, lo, uint64(prev)) // r < prev, so the quotient is below W
	return int64(q)
}

// Refund gives back n admissions made at instant at (the admitting
// decision's now, not the time of the refund) to the window that counted
// them: the state's current window, or its previous one once a later
// window has counted too (the count never goes below zero). A window older
// than the previous one no longer weighs, and Refund does nothing.
// Refund(0) does nothing; a negative n panics.
func (sw *SlidingWindow) Refund(s *SlidingWindowState, at, n int64) {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: SlidingWindow.Refund with negative n")
		}
		return
	}
	w := sw.index.div(at)
	for {
		old := s.w.Load()
		idx, cur, prev := int64(old>>(2*sw.shift)), int64(old>>sw.shift&sw.mask), int64(old&sw.mask)
		var next uint64
		switch {
		case idx == w && cur > 0:
			next = old - uint64(min(n, cur))<<sw.shift
		case idx == w+1 && prev > 0:
			next = old - uint64(min(n, prev)) // counted in what is now the previous window
		default:
			return
		}
		if s.w.CompareAndSwap(old, next) {
			return
		}
	}
}

// Recovered reports whether s is indistinguishable from a fresh state at
// now, so that a table may evict it.
func (sw *SlidingWindow) Recovered(s *SlidingWindowState, now int64) bool {
	v := sw.view(s.w.Load(), now)
	return !v.back && v.cur == 0 && v.prev == 0
}

func (sw *SlidingWindow) decision(v swView, now int64) Decision {
	d := Decision{Limit: sw.limit}
	if !v.back {
		d.Remaining = max(0, sw.limit-v.cur-sw.weighted(v.prev, v.e))
	}
	switch {
	case v.cur > 0:
		d.ResetAfter = time.Duration((v.idx+2)*sw.window - now)
	case v.prev > 0: // its weight is positive anywhere inside window idx
		d.ResetAfter = time.Duration((v.idx+1)*sw.window - now)
	case v.back:
		d.ResetAfter = time.Duration(v.idx*sw.window - now)
	}
	return d
}

// SlidingWindowLimiter is a single sliding-window counter: a SlidingWindow
// with its own state, for a limit that is not per key. It is safe for
// concurrent use, lock-free, and must not be copied after first use. Use
// NewSlidingWindowLimiter; the zero value is not usable.
type SlidingWindowLimiter struct {
	_     [cacheLine]byte
	state SlidingWindowState
	cfg   SlidingWindow
	_     [cacheLine]byte
}

// NewSlidingWindowLimiter returns a fresh sliding-window counter of limit per
// window. It returns NewSlidingWindow's errors.
func NewSlidingWindowLimiter(limit int64, window time.Duration) (*SlidingWindowLimiter, error) {
	sw, err := NewSlidingWindow(limit, window)
	if err != nil {
		return nil, err
	}
	return &SlidingWindowLimiter{cfg: *sw}, nil
}

// AllowN admits n requests at now if the estimate leaves room; see
// SlidingWindow.AllowN.
func (l *SlidingWindowLimiter) AllowN(now, n int64) Decision { return l.cfg.AllowN(&l.state, now, n) }

// Allow is shorthand for AllowN(clock.Now(), 1).
func (l *SlidingWindowLimiter) Allow() Decision { return l.cfg.AllowN(&l.state, clock.Now(), 1) }

// Refund gives back n admissions made at instant at; see SlidingWindow.Refund.
func (l *SlidingWindowLimiter) Refund(at, n int64) { l.cfg.Refund(&l.state, at, n) }
