package bench

import (
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/zeromicro/go-zero/core/load"
)

// BenchmarkAdaptiveAcquireDone: one admission plus one report of success of
// an adaptive limiter, serial and parallel, with limits high enough never to
// reject (rejections are counted and reported as rejects/op, so a peer that
// sheds on the benchmark machine's CPU load shows it). Each op includes the
// limiter's own latency measurement (sluice reads the monotonic clock at
// admission and at Done).
func BenchmarkAdaptiveAcquireDone(b *testing.B) {
	load.DisableLog()
	impls := []struct {
		name string
		new  func(b *testing.B) func() bool
	}{
		{"sluice", func(b *testing.B) func() bool {
			l := defaultLimiter(b, []adaptive.Option{adaptive.WithLimits(64, 1<<20), adaptive.WithInitialLimit(1 << 16)})
			return func() bool {
				tok, ok := l.TryAcquire()
				if ok {
					tok.Done(adaptive.Success)
				}
				return ok
			}
		}},
		// sluice_at is the form shed uses: the caller reads the clock once per
		// request for every rule and hands now in; here now is a counter, so
		// this is the limiter's own cost without the two clock reads.
		{"sluice_at", func(b *testing.B) func() bool {
			l := defaultLimiter(b, []adaptive.Option{adaptive.WithLimits(64, 1<<20), adaptive.WithInitialLimit(1 << 16)})
			var now atomic.Int64
			return func() bool {
				t := now.Add(1000)
				tok, err := l.TryAcquireAt(t, adaptive.Request{})
				if err == nil {
					tok.DoneAt(t+500, adaptive.Success)
				}
				return err == nil
			}
		}},
		{"gozero", func(*testing.B) func() bool {
			s := load.NewAdaptiveShedder()
			return func() bool {
				p, err := s.Allow()
				if err != nil {
					return false
				}
				p.Pass()
				return true
			}
		}},
		{"aegisbbr", func(*testing.B) func() bool {
			l := bbr.NewLimiter()
			return func() bool {
				done, err := l.Allow()
				if err != nil {
					return false
				}
				done(ratelimit.DoneInfo{})
				return true
			}
		}},
		{"failsafe", func(*testing.B) func() bool {
			l := adaptivelimiter.NewBuilder[any]().WithLimits(64, 1<<20, 1<<16).Build()
			return func() bool {
				p, ok := l.TryAcquirePermit()
				if ok {
					p.Record()
				}
				return ok
			}
		}},
	}
	for _, impl := range impls {
		b.Run(impl.name+"/serial", func(b *testing.B) {
			op := impl.new(b)
			b.ReportAllocs()
			var rejects int
			for b.Loop() {
				if !op() {
					rejects++
				}
			}
			b.ReportMetric(float64(rejects)/float64(b.N), "rejects/op")
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			op := impl.new(b)
			b.ReportAllocs()
			inParallel(b, 1, func(_, n int) {
				for range n {
					op()
				}
			})
		})
	}
}

// defaultLimiter returns a Limiter with opts over an adaptive.Default with
// algOpts.
func defaultLimiter(b *testing.B, algOpts []adaptive.Option, opts ...adaptive.LimiterOption) *adaptive.Limiter {
	alg, err := adaptive.NewDefault(algOpts...)
	if err != nil {
		b.Fatal(err)
	}
	l, err := adaptive.NewLimiter(alg, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return l
}
