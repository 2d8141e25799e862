package queueing

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
)

// A permit granted in the same instant the waiter's context ends is never
// lost: select picks one of the two ready cases at random, and either the
// waiter returns nil holding the permit, or it returns ctx.Err() and the
// permit goes to the next waiter.
func TestGrantRacesCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem)
		outcomes := map[bool]int{}
		for range 200 {
			if !q.TryAcquire(1) {
				t.Fatal("permit not free at the start of a round")
			}
			// w is queued as Acquire would queue it, then granted.
			q.mu.Lock()
			q.nwait.Add(1)
			w := &waiter{n: 1, lane: q.def.l, ready: make(chan struct{}, 1)}
			q.line.push(w)
			q.unlock()
			next := goAcquire(context.Background(), q.def, 1)
			q.Release(1) // granted to w: both w.ready and ctx.Done are ready below
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := q.wait(ctx, w, math.MaxInt64, 0)
			synctest.Wait()
			switch {
			case err == nil:
				outcomes[true]++
				if next.finished() {
					t.Fatal("granted waiter kept the permit, yet the next waiter got one too")
				}
				q.Release(1)
				synctest.Wait()
			case errors.Is(err, context.Canceled):
				outcomes[false]++
			default:
				t.Fatalf("unexpected %v", err)
			}
			if !next.finished() || next.err != nil {
				t.Fatalf("the permit did not reach the next waiter: %v", next.err)
			}
			q.Release(1)
			if sem.Inflight() != 0 || q.Len() != 0 {
				t.Fatalf("inflight %d, len %d", sem.Inflight(), q.Len())
			}
		}
		if outcomes[true] == 0 || outcomes[false] == 0 {
			t.Fatalf("both sides of the race should occur in 200 rounds: %v", outcomes)
		}
	})
}

func TestZeroAndNegative(t *testing.T) {
	sem := newSem(t, 1)
	q := newQueue(t, sem)
	if err := q.Acquire(context.Background(), 0); err != nil || !q.TryAcquire(0) {
		t.Fatal("n = 0 must succeed and take nothing")
	}
	q.Release(0)
	sem.noneHeld()
	for name, f := range map[string]func(){
		"Acquire":    func() { q.Acquire(context.Background(), -1) },
		"TryAcquire": func() { q.TryAcquire(-1) },
		"Release":    func() { q.Release(-1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(-1) did not panic", name)
				}
			}()
			f()
		}()
	}
}
