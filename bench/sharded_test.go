package bench

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// BenchmarkGlobalCap: one decision against a global throughput cap, with a
// cap high enough never to reject (each benchmark checks it). The clock is
// read once outside the loop and handed in, as sluice's callers do:
//   - sluice-sharded: ratelimit.ShardedWindow.AllowN with the default
//     shard count (shard-local cached quota);
//   - sluice-single: the same ShardedWindow with one shard, so every caller
//     writes one word (the single-word baseline);
//   - sluice-bucket: ratelimit.ShardedBucket.AllowN (a token bucket
//     split over the default shard count);
//   - xtimerate: golang.org/x/time/rate Limiter.AllowN at a fixed time, with
//     a burst so large it never runs dry.
func BenchmarkGlobalCap(b *testing.B) {
	const limit = math.MaxInt32 // per hour: more than any run makes
	impls := []struct {
		name string
		new  func() func() bool
	}{
		{"sluice-sharded", func() func() bool {
			w, err := ratelimit.NewShardedWindow(limit, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			now := int64(time.Minute)
			return func() bool { return w.AllowN(now, 1).Allowed() }
		}},
		{"sluice-single", func() func() bool {
			w, err := ratelimit.NewShardedWindow(limit, time.Hour, concurrency.WithShardCount(1))
			if err != nil {
				b.Fatal(err)
			}
			now := int64(time.Minute)
			return func() bool { return w.AllowN(now, 1).Allowed() }
		}},
		{"sluice-bucket", func() func() bool {
			bk, err := ratelimit.NewShardedBucket(ratelimit.Per(1_000_000_000, time.Second), limit)
			if err != nil {
				b.Fatal(err)
			}
			now := int64(time.Minute)
			return func() bool { return bk.AllowN(now, 1).Allowed() }
		}},
		{"xtimerate", func() func() bool {
			l := rate.NewLimiter(rate.Limit(1e9), limit)
			now := time.Now()
			return func() bool { return l.AllowN(now, 1) }
		}},
	}
	for _, impl := range impls {
		belowCap(b, impl.name, func(*testing.B) (func() bool, func()) { return impl.new(), func() {} })
	}
}

// BenchmarkShedGlobalCap: one admission through shed.Controller.Decide
// (the clock read included, as a request pays it) under one Global rule, a
// cap high enough never to reject, serial and parallel. Decide's result is
// checked and its token released, as a request does.
//   - sluice, sluice-window: a Global token bucket and fixed window (both
//     sharded), against xtimerate, x/time/rate's Allow (its own clock read
//     included);
//   - sluice-conc: a Global Concurrency rule of concurrencyCap, which
//     decides on the sharded semaphore (GOMAXPROCS above 1);
//   - sluice-conc-single: the same rule at singleWordCap, below the limit
//     from which shed shards, so on the single-word semaphore;
//   - xsync: golang.org/x/sync/semaphore TryAcquire and Release of one
//     unit, the peer of the concurrency rules;
//   - sluice-given, xtimerate-given: the token bucket of sluice and
//     xtimerate with the clock taken out of both: every Attempt at one
//     instant (Attempt.Now), every AllowN at one time. Not what a request
//     pays: what each costs besides its clock read.
func BenchmarkShedGlobalCap(b *testing.B) {
	const limit = math.MaxInt32
	impls := []struct {
		name string
		new  func(b *testing.B) (allow func() bool, done func())
	}{
		{"sluice", func(b *testing.B) (func() bool, func()) {
			return shedDecide(b, shed.Rule{Name: "global", Algorithm: shed.TokenBucket, Limit: limit,
				Rate: ratelimit.Per(1_000_000_000, time.Second)})
		}},
		{"sluice-window", func(b *testing.B) (func() bool, func()) {
			return shedDecide(b, shed.Rule{Name: "global", Algorithm: shed.FixedWindow, Limit: limit, Window: time.Hour})
		}},
		{"sluice-conc", func(b *testing.B) (func() bool, func()) {
			return shedDecide(b, shed.Rule{Name: "inflight", Algorithm: shed.Concurrency, Limit: concurrencyCap})
		}},
		{"sluice-conc-single", func(b *testing.B) (func() bool, func()) {
			return shedDecide(b, shed.Rule{Name: "inflight", Algorithm: shed.Concurrency, Limit: singleWordCap})
		}},
		{"xtimerate", func(b *testing.B) (func() bool, func()) {
			l := rate.NewLimiter(rate.Limit(1e9), limit)
			return l.Allow, func() {}
		}},
		{"sluice-given", func(b *testing.B) (func() bool, func()) {
			return shedDecideAt(b, shed.Rule{Name: "global", Algorithm: shed.TokenBucket, Limit: limit,
				Rate: ratelimit.Per(1_000_000_000, time.Second)}, int64(time.Minute))
		}},
		{"xtimerate-given", func(b *testing.B) (func() bool, func()) {
			l := rate.NewLimiter(rate.Limit(1e9), limit)
			now := time.Now()
			return func() bool { return l.AllowN(now, 1) }, func() {}
		}},
		{"xsync", func(b *testing.B) (func() bool, func()) {
			s := semaphore.NewWeighted(concurrencyCap)
			return func() bool {
				if !s.TryAcquire(1) {
					return false
				}
				s.Release(1)
				return true
			}, func() {}
		}},
	}
	for _, impl := range impls {
		belowCap(b, impl.name, impl.new)
	}
}

// concurrencyCap and singleWordCap are the limits of BenchmarkShedGlobalCap's
// concurrency rules: shed decides a Global Concurrency rule without a queue
// on the sharded semaphore from 8 permits a shard (64 at GOMAXPROCS 2, 512
// at 16), so the first is sharded and the second, below any of those, is
// not; neither is reached by the GOMAXPROCS goroutines of its parallel case up to 32.
const concurrencyCap, singleWordCap = 1 << 20, 32

// shedDecide returns an admission through Controller.Decide under the one
// rule r (its token done at once), and the Controller's Close.
func shedDecide(b *testing.B, r shed.Rule) (func() bool, func()) {
	return shedDecideAt(b, r, 0)
}

// shedDecideAt is shedDecide with every Attempt at now (0: Decide reads the
// clock).
func shedDecideAt(b *testing.B, r shed.Rule, now int64) (func() bool, func()) {
	c, err := shed.New([]shed.Rule{r})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	return func() bool {
		d, tok, err := c.Decide(ctx, shed.Attempt{Now: now})
		tok.Done(shed.Success)
		return err == nil && d.Allowed
	}, func() { _ = c.Close() }
}

// belowCap runs allow serially as name/serial and in parallel (inParallel) as
// name/parallel, each on a fresh instance from mk (done when the
// sub-benchmark ends), and fails on a rejection: the caps are never reached.
func belowCap(b *testing.B, name string, mk func(b *testing.B) (allow func() bool, done func())) {
	b.Run(name+"/serial", func(b *testing.B) {
		allow, done := mk(b)
		defer done()
		b.ReportAllocs()
		for b.Loop() {
			if !allow() {
				b.Fatal("rejected below the cap")
			}
		}
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		allow, done := mk(b)
		defer done()
		b.ReportAllocs()
		inParallel(b, 1, func(_, n int) {
			for range n {
				if !allow() {
					b.Error("rejected below the cap")
					return
				}
			}
		})
	})
}
