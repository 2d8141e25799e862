package bench

import (
	"sync/atomic"
	"testing"
	"time"

	sluiceratelimit "github.com/sluicehq/sluice/ratelimit"
	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

// tbRate and tbBurst make a bucket that never rejects in these benchmarks:
// one token per nanosecond while the callers' time advances 1 ns per call,
// and a burst (2^30) far above the drift between parallel callers.
const (
	tbRate  = 1_000_000_000 // per second
	tbBurst = 1 << 30
)

// countingClock is uber's clock with its sleeps counted and skipped: Take
// never rejects, it blocks until its slot, so with a real Sleep the case
// measured sleeps whenever a caller found itself ahead of the rate (at short
// benchtimes, and in parallel always: uber reads the clock before it loads
// its state, so a caller whose reading went stale while another moved the
// state on waits out the difference). Skipping the sleep leaves what the
// other cases measure, one decision, uber's own clock read included; the
// benchmark reports the sleeps it skipped per call.
type countingClock struct{ sleeps atomic.Int64 }

func (c *countingClock) Now() time.Time { return time.Now() }
func (c *countingClock) Sleep(time.Duration) {
	c.sleeps.Add(1)
}

// BenchmarkTokenBucketAllow: one token-bucket decision of one token, serial
// and parallel. sluice and x/time/rate take the time explicitly (each
// goroutine advances its own by 1 ns per call, so both see out-of-order
// times in parallel); uber reads the clock itself and blocks instead of
// rejecting, so its sleeps are skipped (see countingClock). Each case
// checks that every call was admitted.
func BenchmarkTokenBucketAllow(b *testing.B) {
	base := time.Now()
	impls := []struct {
		name string
		// new returns a decision taking the caller's elapsed ns, and a check
		// run after the benchmark.
		new func(b *testing.B) (allow func(elapsed int64) bool, check func(calls int))
	}{
		{"sluice", func(b *testing.B) (func(int64) bool, func(int)) {
			tb, err := sluiceratelimit.NewTokenBucket(sluiceratelimit.Per(tbRate, time.Second), tbBurst)
			if err != nil {
				b.Fatal(err)
			}
			start := int64(1) << 62 // where clock.Now starts
			return func(elapsed int64) bool { return tb.AllowN(start+elapsed, 1).Allowed() }, func(int) {}
		}},
		{"xtimerate", func(b *testing.B) (func(int64) bool, func(int)) {
			lim := rate.NewLimiter(rate.Limit(tbRate), tbBurst)
			return func(elapsed int64) bool { return lim.AllowN(base.Add(time.Duration(elapsed)), 1) }, func(int) {}
		}},
		{"uber", func(b *testing.B) (func(int64) bool, func(int)) {
			clk := &countingClock{}
			lim := ratelimit.New(tbRate, ratelimit.WithClock(clk))
			return func(int64) bool { lim.Take(); return true }, func(calls int) {
				b.ReportMetric(float64(clk.sleeps.Load())/float64(max(calls, 1)), "skipped-sleeps/op")
			}
		}},
	}
	for _, impl := range impls {
		b.Run(impl.name+"/serial", func(b *testing.B) {
			allow, check := impl.new(b)
			b.ReportAllocs()
			var elapsed int64
			for b.Loop() {
				elapsed++
				if !allow(elapsed) {
					b.Fatal("rejected below the rate")
				}
			}
			check(int(elapsed))
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			allow, check := impl.new(b)
			var rejected atomic.Int64
			b.ReportAllocs()
			inParallel(b, 1, func(_, n int) {
				var elapsed, miss int64
				for range n {
					elapsed++
					if !allow(elapsed) {
						miss++
					}
				}
				rejected.Add(miss)
			})
			if n := rejected.Load(); n != 0 {
				b.Errorf("%d calls rejected below the rate", n)
			}
			check(b.N)
		})
	}
}
