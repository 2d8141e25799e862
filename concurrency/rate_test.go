package concurrency

import (
	"testing"
	"time"
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
