package ratelimit

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestRateHugeCostIsNeverAdmitted: whatever the state, a cost above the
// limit (up to math.MaxInt64) is rejected with RetryAfter Never and changes
// nothing, a refund of any size never makes room beyond a fresh state, and
// the sharded window answers huge costs the same way.
func TestRateHugeCostIsNeverAdmitted(t *testing.T) {
	for _, impl := range rateImpls() {
		t.Run(impl.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				limit := rapid.Int64Range(1, 12).Draw(t, "limit")
				window := int64(MinWindow) + rapid.Int64Range(0, 1000).Draw(t, "window")
				s := mustRateSubject(t, impl, limit, time.Duration(window))
				now := rapid.SampledFrom([]int64{0, 777, 1 << 62, 1<<62 + 1<<61 - 1}).Draw(t, "start")
				huge := rapid.OneOf(rapid.Int64Range(limit+1, 1<<20), rapid.Int64Range(limit+1, math.MaxInt64),
					rapid.Just(int64(math.MaxInt64)))
				t.Repeat(map[string]func(*rapid.T){
					"small": func(t *rapid.T) { s.AllowN(now, rapid.Int64Range(1, limit).Draw(t, "n")) },
					"huge": func(t *rapid.T) {
						before := s.AllowN(now, 0)
						n := huge.Draw(t, "n")
						if d := s.AllowN(now, n); d.Allowed() || d.RetryAfter != Never {
							t.Fatalf("AllowN(%d, %d) with limit %d: %+v, want RetryAfter Never", now, n, limit, d)
						}
						if after := s.AllowN(now, 0); after != before {
							t.Fatalf("a refused huge cost changed the state: %+v, then %+v", before, after)
						}
					},
					"refund huge": func(t *rapid.T) {
						s.Refund(now, huge.Draw(t, "n"))
						if d := s.AllowN(now, 0); d.Remaining > limit || d.Remaining < 0 {
							t.Fatalf("after a huge refund Remaining is %d of %d", d.Remaining, limit)
						}
					},
					"advance": func(t *rapid.T) {
						now = min(now+rapid.Int64Range(0, 2*window).Draw(t, "dt"), 1<<62+1<<61-1)
					},
				})
			})
		})
	}
	sw, err := NewShardedWindow(5, time.Second, WithShardCount(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{6, 1 << 40, math.MaxInt64} {
		if d := sw.AllowN(1<<62, n); d.Allowed() || d.RetryAfter != Never {
			t.Errorf("ShardedWindow.AllowN(%d): %+v, want RetryAfter Never", n, d)
		}
	}
	if d := sw.AllowN(1<<62, 5); !d.Allowed() {
		t.Errorf("the whole limit after huge refusals: %+v", d)
	}
}
