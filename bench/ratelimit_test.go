package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
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

// countingClock is uber's clock with its sleeps counted: Take never rejects,
// it blocks, so the benchmark reports its sleeps per call and fails when
// more than 1% of calls slept (the rate would then be too low to measure a
// decision). Some sleeps are unavoidable in parallel: uber reads the clock
// before it loads its state, so a caller whose reading went stale while
// another caller moved the state on (on a busy machine, a descheduled
// goroutine) waits out the difference.
type countingClock struct{ sleeps atomic.Int64 }

func (c *countingClock) Now() time.Time { return time.Now() }
func (c *countingClock) Sleep(d time.Duration) {
	c.sleeps.Add(1)
	time.Sleep(d)
}

// BenchmarkTokenBucketAllow: one token-bucket decision of one token, serial
// and parallel. sluice and x/time/rate take the time explicitly (each
// goroutine advances its own by 1 ns per call, so both see out-of-order
// times in parallel); uber reads the clock itself and blocks instead of
// rejecting, so its rate is set high enough that it never sleeps. Each case
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
			tb, err := concurrency.NewTokenBucket(concurrency.Per(tbRate, time.Second), tbBurst)
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
				n := clk.sleeps.Load()
				b.ReportMetric(float64(n)/float64(max(calls, 1)), "sleeps/op")
				if n*100 > int64(calls) {
					b.Errorf("uber limiter slept %d times in %d calls: the rate is too low to measure a decision", n, calls)
				}
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
			b.RunParallel(func(pb *testing.PB) {
				var elapsed, miss int64
				for pb.Next() {
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
