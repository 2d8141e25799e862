package ratelimit

import (
	"fmt"
	"math"
	"math/bits"
)

// Changing a window counter's limit in place. The state of FixedWindow and
// SlidingWindow packs counts into a field whose width the configuration
// chooses, so a configuration of another limit reads an old word only when
// both share that width: WithLimit keeps the width, and Widened picks the
// widest one the window allows, so that a table whose limit may change later
// can take any limit up to MaxLimit without a new state format.

// indexBits returns how many bits the window index needs for any now in the
// supported range (below 2^63): bits.Len of MaxInt64/window.
func indexBits(window int64) uint {
	return uint(bits.Len64(uint64(math.MaxInt64 / window)))
}

// MaxLimit returns the largest limit a FixedWindow of f's state format can
// count to: 2^width − 1 for a count field of width bits.
func (f *FixedWindow) MaxLimit() int64 { return int64(f.mask) }

// Widened returns a FixedWindow of f's limit and window whose count field is
// the widest the window leaves beside the window index (for a one-day
// window, 47 bits), so that WithLimit on it accepts any limit up to
// MaxLimit. Its states are not f's: a state written by f must not be used
// with the result. The result is immutable and safe for concurrent use.
func (f *FixedWindow) Widened() *FixedWindow {
	shift := 64 - indexBits(f.window) // NewFixedWindow checked that limit fits: shift ≥ bits.Len(limit)
	w := *f
	w.shift, w.mask = shift, 1<<shift-1
	return &w
}

// WithLimit returns a FixedWindow of f's window and state format that admits
// limit per window. A state used with f keeps its meaning with the result:
// its window and count carry over, so a key that was counted c in the
// current window has limit − c left (none when c ≥ limit) until the window
// ends. It returns an error when limit is not positive or above MaxLimit
// (the count would not fit f's state format; see Widened). The result is
// immutable and safe for concurrent use, also together with f on the same
// states.
func (f *FixedWindow) WithLimit(limit int64) (*FixedWindow, error) {
	if err := checkRateLimit("limit", limit); err != nil {
		return nil, err
	}
	if limit > f.MaxLimit() {
		return nil, fmt.Errorf("ratelimit: a fixed window state of %d count bits cannot count to %d; at most %d",
			f.shift, limit, f.MaxLimit())
	}
	w := *f
	w.limit = limit
	return &w, nil
}

// MaxLimit returns the largest limit a SlidingWindow of sw's state format
// can count to: 2^width − 1 for count fields of width bits.
func (sw *SlidingWindow) MaxLimit() int64 { return int64(sw.mask) }

// Widened returns a SlidingWindow of sw's limit and window whose two count
// fields are the widest the window leaves beside the window index (for a
// one-day window, 23 bits each), so that WithLimit on it accepts any limit
// up to MaxLimit. Its states are not sw's: a state written by sw must not be
// used with the result. The result is immutable and safe for concurrent
// use.
func (sw *SlidingWindow) Widened() *SlidingWindow {
	shift := (64 - indexBits(sw.window)) / 2 // NewSlidingWindow checked that limit fits
	w := *sw
	w.shift, w.mask = shift, 1<<shift-1
	return &w
}

// WithLimit returns a SlidingWindow of sw's window and state format that
// admits limit per window. A state used with sw keeps its meaning with the
// result: its window and both counts carry over, and the estimate is
// compared with the new limit from then on. It returns an error when limit
// is not positive or above MaxLimit (see Widened). The result is immutable
// and safe for concurrent use, also together with sw on the same states.
func (sw *SlidingWindow) WithLimit(limit int64) (*SlidingWindow, error) {
	if err := checkRateLimit("limit", limit); err != nil {
		return nil, err
	}
	if limit > sw.MaxLimit() {
		return nil, fmt.Errorf("ratelimit: a sliding window state of %d count bits cannot count to %d; at most %d",
			sw.shift, limit, sw.MaxLimit())
	}
	w := *sw
	w.limit = limit
	return &w, nil
}
