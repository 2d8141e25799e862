package ratelimit

import (
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestRateIntervalAndString(t *testing.T) {
	for _, c := range []struct {
		rate     Rate
		interval int64
		text     string
	}{
		{Per(100, time.Second), 10_000_000, "100/1s"},
		{Per(3, time.Second), 333_333_334, "3/1s"}, // rounded up: never faster
		{Per(1, time.Nanosecond), 1, "1/1ns"},
		{Per(7, time.Hour), 514_285_714_286, "7/1h0m0s"},
	} {
		got, err := c.rate.interval()
		if err != nil || got != c.interval {
			t.Errorf("%v: interval %d, %v; want %d", c.rate, got, err, c.interval)
		}
		if got*c.rate.Count < int64(c.rate.Per) || (got-1)*c.rate.Count >= int64(c.rate.Per) {
			t.Errorf("%v: interval %d is not the ceiling", c.rate, got)
		}
		if c.rate.String() != c.text {
			t.Errorf("String() = %q, want %q", c.rate.String(), c.text)
		}
	}
}

// TestDividerIsExact compares the multiply-based division with the
// hardware one over random and edge-case operands.
func TestDividerIsExact(t *testing.T) {
	edges := []int64{0, 1, 2, 3, 1<<62 - 1, 1 << 62, 1<<62 + 1<<61, math.MaxInt64, math.MaxInt64 - 1}
	divisors := []int64{1, 2, 3, 5, 7, 10, 1000, 1_000_000_007, 333_333_334, 1<<59 - 1, 1 << 59, 1<<59 + 1, math.MaxInt64}
	for _, d := range divisors {
		v := newDivider(d)
		for _, x := range edges {
			if got := v.div(x); got != x/d {
				t.Fatalf("%d/%d = %d, divider says %d", x, d, x/d, got)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.OneOf(rapid.Int64Range(1, 1<<20), rapid.Int64Range(1, math.MaxInt64)).Draw(t, "d")
		x := rapid.OneOf(rapid.Int64Range(0, 1<<20), rapid.Int64Range(0, math.MaxInt64)).Draw(t, "x")
		if got := newDivider(d).div(x); got != x/d {
			t.Fatalf("%d/%d = %d, divider says %d", x, d, x/d, got)
		}
	})
}

// TestWindowsBelowMinimumAreErrors: a window of nanoseconds (Window: 15,
// a 1 ns sliding log) is an error for every window limiter, below
// MinWindow; MinWindow itself is accepted.
func TestWindowsBelowMinimumAreErrors(t *testing.T) {
	ctors := map[string]func(time.Duration) error{
		"fixed": func(w time.Duration) error { _, err := NewFixedWindow(10, w); return err },
		"fixed limiter": func(w time.Duration) error {
			_, err := NewFixedWindowLimiter(10, w)
			return err
		},
		"sliding": func(w time.Duration) error { _, err := NewSlidingWindow(10, w); return err },
		"sliding limiter": func(w time.Duration) error {
			_, err := NewSlidingWindowLimiter(10, w)
			return err
		},
		"log":         func(w time.Duration) error { _, err := NewSlidingLog(10, w); return err },
		"log limiter": func(w time.Duration) error { _, err := NewSlidingLogLimiter(10, w); return err },
		"sharded":     func(w time.Duration) error { _, err := NewShardedWindow(10, w); return err },
	}
	for name, ctor := range ctors {
		for _, w := range []time.Duration{1, 15, time.Microsecond, MinWindow - 1} {
			if err := ctor(w); err == nil || !strings.HasPrefix(err.Error(), "ratelimit: ") {
				t.Errorf("%s window %v: %v, want a ratelimit: error", name, w, err)
			}
		}
		if err := ctor(MinWindow); err != nil {
			t.Errorf("%s window MinWindow: %v", name, err)
		}
	}
}
