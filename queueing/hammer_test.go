package queueing

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// 1,000 goroutines (100 under -race, against a limit a tenth as large: see
// hammerGoroutines) acquire and release, 10 times each and for at most 2 s
// of fake time, with random sizes, priorities, partitions, timeouts and
// cancellations, under each discipline. Afterwards nothing is held, nobody waits, no admission ever
// passed the limit (checked admitter) and the goroutine count is back to
// where it started (no goroutine that was not there before).
func TestHammer(t *testing.T) {
	// Queue lengths scale with the goroutines, so that queues fill (and
	// displace) under -race as they do without it.
	scaled := func(n int) int { return n * hammerGoroutines / 1000 }
	configs := map[string][]Option{
		"fifo-deadline-aware": {WithMaxLength(scaled(200)), WithMaxWait(20 * time.Millisecond), WithDeadlineAware()},
		"adaptive-lifo-codel": {WithOrder(AdaptiveLIFO), WithCoDel(DefaultTarget, 20*time.Millisecond),
			WithMaxLength(scaled(DefaultMaxLength))},
		"reserve-partitions": {WithReserve(0.2, Critical), WithPartition("a", 0.4), WithPartition("b", 0.3),
			WithMaxLength(scaled(DefaultMaxLength))},
	}
	for name, opts := range configs {
		t.Run(name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			synctest.Test(t, func(t *testing.T) { hammer(t, opts) })
			goleak.VerifyNone(t, before)
		})
	}
}

func hammer(t *testing.T, opts []Option) {
	sem := newSem(t, hammerLimit)
	q := newQueue(t, sem, opts...)
	parts := []string{""}
	if len(q.parts) > 0 {
		parts = append(parts, "a", "b")
	}
	end := time.Now().Add(2 * time.Second)
	var served, failed atomic.Int64
	var wg sync.WaitGroup
	for g := range hammerGoroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 10 && time.Now().Before(end); i++ {
				l := mustLane(t, q, Priority(rng.IntN(4)), parts[rng.IntN(len(parts))])
				n := int64(1 + rng.IntN(2))
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(30))*time.Millisecond)
				if rng.IntN(4) == 0 {
					// Cancel at a random instant, racing the grant.
					stop := time.AfterFunc(time.Duration(rng.IntN(10))*time.Millisecond, cancel)
					defer stop.Stop()
				}
				err := l.Acquire(ctx, n)
				cancel()
				switch {
				case err == nil:
					served.Add(1)
					time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
					l.Release(n)
				case errors.Is(err, ErrShed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
					failed.Add(1)
					time.Sleep(time.Duration(1+rng.IntN(3)) * time.Millisecond)
				default:
					t.Errorf("unexpected error: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if served.Load() == 0 || failed.Load() == 0 {
		t.Fatalf("the hammer did not exercise both paths: served %d, failed %d", served.Load(), failed.Load())
	}
	if sem.Inflight() != 0 || q.Len() != 0 {
		t.Fatalf("after the hammer: inflight %d, queued %d", sem.Inflight(), q.Len())
	}
	for _, p := range parts {
		if h, _ := q.Held(p); h != 0 {
			t.Fatalf("partition %q still holds %d", p, h)
		}
	}
	t.Logf("served %d, failed %d, stats %+v", served.Load(), failed.Load(), q.Stats())
}
