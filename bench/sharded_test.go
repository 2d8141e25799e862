package bench

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/shed"
	"golang.org/x/time/rate"
)

// BenchmarkGlobalCap: one decision against a global throughput cap, with a
// cap high enough never to reject (each benchmark checks it). The clock is
// read once outside the loop and handed in, as sluice's callers do:
//   - sluice-sharded: concurrency.ShardedWindow.AllowN with the default
//     shard count (shard-local cached quota);
//   - sluice-single: the same ShardedWindow with one shard, so every caller
//     writes one word (the single-word baseline);
//   - sluice-bucket: concurrency.ShardedBucket.AllowN (a token bucket
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
			w, err := concurrency.NewShardedWindow(limit, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			now := int64(time.Minute)
			return func() bool { return w.AllowN(now, 1).Allowed() }
		}},
		{"sluice-single", func() func() bool {
			w, err := concurrency.NewShardedWindow(limit, time.Hour, concurrency.WithShardCount(1))
			if err != nil {
				b.Fatal(err)
			}
			now := int64(time.Minute)
			return func() bool { return w.AllowN(now, 1).Allowed() }
		}},
		{"sluice-bucket", func() func() bool {
			bk, err := concurrency.NewShardedBucket(concurrency.Per(1_000_000_000, time.Second), limit)
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
		b.Run(impl.name+"/serial", func(b *testing.B) {
			allow := impl.new()
			b.ReportAllocs()
			for b.Loop() {
				if !allow() {
					b.Fatal("rejected below the cap")
				}
			}
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			allow := impl.new()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !allow() {
						b.Error("rejected below the cap")
						return
					}
				}
			})
		})
	}
}

// BenchmarkShedGlobalCap: one admission through shed.Controller.Decide
// (the clock read included, as a request pays it) under one Global rate
// rule, a cap high enough never to reject, against x/time/rate's Allow (its
// own clock read included), serial and parallel. Decide's result is
// checked and its token released, as a request does.
func BenchmarkShedGlobalCap(b *testing.B) {
	const limit = math.MaxInt32
	impls := []struct {
		name string
		new  func(b *testing.B) (allow func() bool, done func())
	}{
		{"sluice", func(b *testing.B) (func() bool, func()) {
			c, err := shed.New([]shed.Rule{{Name: "global", Algorithm: shed.TokenBucket, Limit: limit,
				Rate: concurrency.Per(1_000_000_000, time.Second)}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			return func() bool {
				d, tok, err := c.Decide(ctx, shed.Attempt{})
				tok.Done(shed.Success)
				return err == nil && d.Allowed
			}, func() { _ = c.Close() }
		}},
		{"sluice-window", func(b *testing.B) (func() bool, func()) {
			c, err := shed.New([]shed.Rule{{Name: "global", Algorithm: shed.FixedWindow, Limit: limit, Window: time.Hour}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			return func() bool {
				d, tok, err := c.Decide(ctx, shed.Attempt{})
				tok.Done(shed.Success)
				return err == nil && d.Allowed
			}, func() { _ = c.Close() }
		}},
		{"xtimerate", func(b *testing.B) (func() bool, func()) {
			l := rate.NewLimiter(rate.Limit(1e9), limit)
			return l.Allow, func() {}
		}},
	}
	for _, impl := range impls {
		b.Run(impl.name+"/serial", func(b *testing.B) {
			allow, done := impl.new(b)
			defer done()
			b.ReportAllocs()
			for b.Loop() {
				if !allow() {
					b.Fatal("rejected below the cap")
				}
			}
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			allow, done := impl.new(b)
			defer done()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !allow() {
						b.Error("rejected below the cap")
						return
					}
				}
			})
		})
	}
}
