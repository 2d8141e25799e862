package queueing

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/concurrency"
)

// TestLaneAheadCountsOnlyWhoWouldBeServedFirst: a critical arrival waits
// behind critical waiters, not sheddable ones; a sheddable one behind all.
func TestLaneAheadCountsOnlyWhoWouldBeServedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem, _ := concurrency.NewSemaphore(1)
		q, err := New(sem)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		crit, _ := q.Lane(Critical, "")
		shed, _ := q.Lane(Sheddable, "")
		if !crit.TryAcquire(1) {
			t.Fatal("empty queue refused")
		}
		if crit.Ahead() != 0 {
			t.Fatal("units ahead in an empty queue")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, l := range []Lane{shed, shed, crit} {
			go func() { _ = l.Acquire(ctx, 1) }()
		}
		synctest.Wait()
		if got := crit.Ahead(); got != 1 {
			t.Fatalf("a critical arrival is behind %d units, want 1 (the critical waiter)", got)
		}
		if got := shed.Ahead(); got != 3 {
			t.Fatalf("a sheddable arrival is behind %d units, want 3", got)
		}
		cancel()
		synctest.Wait()
		crit.Release(1)
	})
}
