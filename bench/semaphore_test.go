package bench

import (
	"testing"

	"github.com/sluicehq/sluice/concurrency"
	"golang.org/x/sync/semaphore"
)

// BenchmarkTryAcquireRelease: one admit plus one release of a weighted
// semaphore, serial and parallel, with a limit high enough never to reject.
func BenchmarkTryAcquireRelease(b *testing.B) {
	const limit = 1 << 20
	impls := []struct {
		name string
		new  func() (acquire func() bool, release func())
	}{
		{"sluice", func() (func() bool, func()) {
			s, err := concurrency.NewSemaphore(limit)
			if err != nil {
				b.Fatal(err)
			}
			return func() bool { return s.TryAcquire(1) }, func() { s.Release(1) }
		}},
		{"sluice-sharded", func() (func() bool, func()) {
			s, err := concurrency.NewShardedSemaphore(limit)
			if err != nil {
				b.Fatal(err)
			}
			return func() bool { return s.TryAcquire(1) }, func() { s.Release(1) }
		}},
		{"xsync", func() (func() bool, func()) {
			s := semaphore.NewWeighted(limit)
			return func() bool { return s.TryAcquire(1) }, func() { s.Release(1) }
		}},
		{"chan", func() (func() bool, func()) {
			c := make(chan struct{}, limit)
			return func() bool {
					select {
					case c <- struct{}{}:
						return true
					default:
						return false
					}
				}, func() {
					<-c
				}
		}},
	}
	for _, impl := range impls {
		b.Run(impl.name+"/serial", func(b *testing.B) {
			acquire, release := impl.new()
			b.ReportAllocs()
			for b.Loop() {
				if !acquire() {
					b.Fatal("rejected below the limit")
				}
				release()
			}
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			acquire, release := impl.new()
			b.ReportAllocs()
			inParallel(b, 1, func(_, n int) {
				for range n {
					if !acquire() {
						b.Error("rejected below the limit")
						return
					}
					release()
				}
			})
		})
	}
}
