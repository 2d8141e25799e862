package bench

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/queueing"
	"golang.org/x/sync/semaphore"
)

// BenchmarkQueueUncontended: one acquire plus one release through a FIFO
// queue that never has to wait, against the bare Semaphore it wraps:
// sluice-fifo is Acquire(ctx) + Release, sluice-fifo-try the non-blocking
// TryAcquire + Release. The queue's price is its fast path: a check that
// nobody waits, the context check of Acquire, and on release the capacity
// hook it registers on the Semaphore.
func BenchmarkQueueUncontended(b *testing.B) {
	const limit = 1 << 20
	ctx := context.Background()
	b.Run("semaphore", func(b *testing.B) {
		s, err := concurrency.NewSemaphore(limit)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if !s.TryAcquire(1) {
				b.Fatal("rejected below the limit")
			}
			s.Release(1)
		}
	})
	b.Run("sluice-fifo-try", func(b *testing.B) {
		q, _ := fifo(b, limit)
		b.ReportAllocs()
		for b.Loop() {
			if !q.TryAcquire(1) {
				b.Fatal("rejected below the limit")
			}
			q.Release(1)
		}
	})
	b.Run("sluice-fifo", func(b *testing.B) {
		q, _ := fifo(b, limit)
		b.ReportAllocs()
		for b.Loop() {
			if err := q.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			q.Release(1)
		}
	})
}

// BenchmarkQueueHandoff: more goroutines than permits (8 per P against 4
// permits), each acquiring with a context, doing trivial work and
// releasing, so that most acquisitions wait and are served by a handoff.
func BenchmarkQueueHandoff(b *testing.B) {
	const permits = 4
	ctx := context.Background()
	impls := []struct {
		name string
		new  func(b *testing.B) (acquire func() error, release func(), done func())
	}{
		{"sluice", func(b *testing.B) (func() error, func(), func()) {
			q, s := fifo(b, permits, queueing.WithMaxLength(1<<20))
			return func() error { return q.Acquire(ctx, 1) }, func() { q.Release(1) }, func() {
				if s.Inflight() != 0 {
					b.Errorf("inflight %d after the run", s.Inflight())
				}
			}
		}},
		{"xsync", func(*testing.B) (func() error, func(), func()) {
			s := semaphore.NewWeighted(permits)
			return func() error { return s.Acquire(ctx, 1) }, func() { s.Release(1) }, func() {}
		}},
	}
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			acquire, release, done := impl.new(b)
			defer done()
			b.ReportAllocs()
			inParallel(b, 8, func(_, n int) {
				var sink int
				for range n {
					if err := acquire(); err != nil {
						b.Error(err)
						return
					}
					sink++ // trivial work
					release()
				}
				_ = sink
			})
		})
	}
}

// fifo returns a FIFO queue with opts over a fresh Semaphore of limit,
// closed when b ends, and the Semaphore.
func fifo(b *testing.B, limit int64, opts ...queueing.Option) (*queueing.Queue, *concurrency.Semaphore) {
	s, err := concurrency.NewSemaphore(limit)
	if err != nil {
		b.Fatal(err)
	}
	q, err := queueing.New(s, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q, s
}
