package penalty

import (
	"math"
	"testing"
	"time"
)

// forevers are durations that put now+d past MaxInt64 for a now of the
// monotonic clock, which starts at 2^62, about 146 years below MaxInt64.
var forevers = []time.Duration{time.Duration(math.MaxInt64), 147 * 365 * 24 * time.Hour}

// clockStart is where clock.Now starts.
const clockStart = int64(1) << 62

// TestForeverTimeoutLastsUntilPardon: a timeout step too long to add to now
// is a timeout that never ends (until Pardon), never one that ended before
// it began.
func TestForeverTimeoutLastsUntilPardon(t *testing.T) {
	for _, d := range forevers {
		b := mustBox(t, 16, WithStrikes(1, time.Hour), WithTimeouts(d))
		now := clockStart + hr
		st := b.Strike("k", now)
		if !st.Started || st.RetryAfter != time.Duration(math.MaxInt64-now) {
			t.Fatalf("timeout %v: %+v, want started with RetryAfter %v", d, st, time.Duration(math.MaxInt64-now))
		}
		for _, later := range []int64{now, now + 100*365*24*hr, math.MaxInt64 - 1} {
			left, ok := b.Check("k", later)
			if !ok || left != time.Duration(math.MaxInt64-later) {
				t.Fatalf("timeout %v: Check at +%v = %v, %v; want still serving", d, time.Duration(later-now), left, ok)
			}
		}
		if st := b.Strike("k", now+sec); st.Started || st.RetryAfter <= 0 {
			t.Fatalf("timeout %v: a strike during it: %+v, want ignored", d, st)
		}
		if !b.Pardon("k") {
			t.Fatal("Pardon found no state")
		}
		if _, ok := b.Check("k", now+sec); ok {
			t.Fatalf("timeout %v: still serving after Pardon", d)
		}
	}
}

// TestForeverWindowAndDecayAreHonoured: a strike window and a level decay
// of centuries mean strikes never expire and levels never decay; neither
// wraps into "already expired".
func TestForeverWindowAndDecayAreHonoured(t *testing.T) {
	for _, d := range forevers {
		b := mustBox(t, 16, WithStrikes(2, d), WithTimeouts(time.Minute, time.Hour), WithLevelDecay(d))
		now := clockStart
		b.Strike("k", now)
		now += 100 * 365 * 24 * hr
		st := b.Strike("k", now) // the first still counts: a timeout
		if !st.Started || st.Level != 1 || st.RetryAfter != time.Minute {
			t.Fatalf("window %v: second strike a century later: %+v, want the first timeout", d, st)
		}
		now += 40 * 365 * 24 * hr // long after it ended, the level has not decayed
		b.Strike("k", now)
		st = b.Strike("k", now+1)
		if !st.Started || st.Level != 2 || st.RetryAfter != time.Hour {
			t.Fatalf("decay %v: %+v, want the second level", d, st)
		}
	}
}
