package queueing

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

func TestNewRejectsBadOptions(t *testing.T) {
	sem, _ := concurrency.NewSemaphore(1)
	bad := map[string]Option{
		"zero length":        WithMaxLength(0),
		"negative wait":      WithMaxWait(-time.Second),
		"target>=interval":   WithCoDel(time.Second, time.Second),
		"zero target":        WithCoDel(0, time.Second),
		"reserve 0":          WithReserve(0, Critical),
		"reserve 1":          WithReserve(1, Critical),
		"partition nameless": WithPartition("", 0.5),
		"partition > 1":      WithPartition("a", 1.5),
		"unknown order":      WithOrder(Order(9)),
	}
	for name, o := range bad {
		if _, err := New(sem, o); err == nil {
			t.Errorf("%s: New returned no error", name)
		}
	}
	if _, err := New(sem, WithPartition("a", 0.6), WithPartition("b", 0.6)); err == nil {
		t.Error("partitions adding up to 1.2 accepted")
	}
	if _, err := New(sem, WithPartition("a", 0.5), WithPartition("a", 0.1)); err == nil {
		t.Error("repeated partition accepted")
	}
	if _, err := New(nil); err == nil {
		t.Error("nil Admitter accepted")
	}
	type bare struct{ Admitter }
	if _, err := New(bare{sem}, WithReserve(0.2, Critical)); err == nil {
		t.Error("reserve accepted over an Admitter without Limit")
	}
}

func TestNewRefusesSharedHook(t *testing.T) {
	sem, _ := concurrency.NewSemaphore(1)
	q, err := New(sem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(sem); !errors.Is(err, concurrency.ErrHookInUse) {
		t.Fatalf("second queue on one semaphore: got %v, want ErrHookInUse", err)
	}
	q.Close()
	q2, err := New(sem)
	if err != nil {
		t.Fatalf("after Close the hook should be free: %v", err)
	}
	q2.Close()
}

func TestFastPathAndRelease(t *testing.T) {
	sem := newSem(t, 2)
	q := newQueue(t, sem)
	if err := q.Acquire(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if q.TryAcquire(1) {
		t.Fatal("TryAcquire admitted past the limit")
	}
	q.Release(2)
	sem.noneHeld()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire on a done context: %v", err)
	}
	sem.noneHeld()
}

// Each discipline serves waiters in its order, one release waking one waiter.
func TestOrder(t *testing.T) {
	cases := []struct {
		order Order
		want  []int
	}{
		{FIFO, []int{0, 1, 2}},
		{LIFO, []int{2, 1, 0}},
		{AdaptiveLIFO, []int{0, 1, 2}}, // no standing queue yet: FIFO
	}
	for _, tc := range cases {
		t.Run(tc.order.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sem := newSem(t, 1)
				q := newQueue(t, sem, WithOrder(tc.order))
				if !q.TryAcquire(1) {
					t.Fatal("could not take the only permit")
				}
				calls := make([]*call, 3)
				for i := range calls {
					calls[i] = goAcquire(context.Background(), q.def, 1)
				}
				if q.Len() != 3 {
					t.Fatalf("Len = %d, want 3", q.Len())
				}
				var got []int
				for range calls {
					q.Release(1)
					synctest.Wait()
					for i, c := range calls {
						if c.finished() && !contains(got, i) {
							if c.err != nil {
								t.Fatalf("waiter %d: %v", i, c.err)
							}
							got = append(got, i)
						}
					}
				}
				if !equal(got, tc.want) {
					t.Fatalf("served %v, want %v", got, tc.want)
				}
				q.Release(1)
				sem.noneHeld()
			})
		})
	}
}

// Adaptive LIFO turns LIFO once the queue has been non-empty for the
// interval, and back to FIFO after it drains.
func TestAdaptiveLIFOSwitches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, WithOrder(AdaptiveLIFO))
		q.TryAcquire(1)
		a := goAcquire(context.Background(), q.def, 1)
		time.Sleep(DefaultInterval)
		b := goAcquire(context.Background(), q.def, 1)
		q.Release(1)
		synctest.Wait()
		if !b.finished() || a.finished() {
			t.Fatalf("standing queue should serve the newest first (a=%v b=%v)", a.finished(), b.finished())
		}
		q.Release(1)
		synctest.Wait()
		if !a.finished() {
			t.Fatal("a not served")
		}
		q.Release(1)
		// Drained: FIFO again.
		q.TryAcquire(1)
		c := goAcquire(context.Background(), q.def, 1)
		d := goAcquire(context.Background(), q.def, 1)
		q.Release(1)
		synctest.Wait()
		if !c.finished() || d.finished() {
			t.Fatal("a fresh queue should be FIFO")
		}
		q.Release(1)
		synctest.Wait()
		q.Release(1)
		sem.noneHeld()
	})
}

func TestMaxLength(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, WithMaxLength(2))
		q.TryAcquire(1)
		a := goAcquire(context.Background(), q.def, 1)
		b := goAcquire(context.Background(), q.def, 1)
		err := q.Acquire(context.Background(), 1)
		if !errors.Is(err, ErrQueueFull) || !errors.Is(err, ErrShed) {
			t.Fatalf("third waiter: got %v, want ErrQueueFull (an ErrShed)", err)
		}
		if st := q.Stats(); st.Shed != 1 || st.QueueFull != 1 || st.Waiting != 2 {
			t.Fatalf("stats %+v", st)
		}
		a.cancel()
		b.cancel()
		synctest.Wait()
		q.Release(1)
		sem.noneHeld()
	})
}

func TestMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, WithMaxWait(50*time.Millisecond))
		q.TryAcquire(1)
		start := time.Now()
		err := q.Acquire(context.Background(), 1)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("got %v, want ErrTimeout", err)
		}
		if waited := time.Since(start); waited != 50*time.Millisecond {
			t.Fatalf("waited %v, want exactly 50ms", waited)
		}
		if q.Len() != 0 || sem.Inflight() != 1 || q.Stats().TimedOut != 1 {
			t.Fatalf("len %d inflight %d stats %+v after a timeout", q.Len(), sem.Inflight(), q.Stats())
		}
		q.Release(1)
	})
}

// A cancelled waiter leaves at once, and a large waiter's departure lets
// smaller ones behind it through.
func TestCancelLeavesAndUnblocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 3)
		q := newQueue(t, sem)
		q.TryAcquire(2)
		big := goAcquire(context.Background(), q.def, 3)
		small := goAcquire(context.Background(), q.def, 1)
		if small.finished() {
			t.Fatal("small waiter passed the big one (head-of-line order broken)")
		}
		big.cancel()
		synctest.Wait()
		if !errors.Is(big.err, context.Canceled) {
			t.Fatalf("big: %v", big.err)
		}
		if !small.finished() || small.err != nil {
			t.Fatalf("small not served after big left: %v", small.err)
		}
		if q.Len() != 0 || sem.Inflight() != 3 {
			t.Fatalf("len %d inflight %d", q.Len(), sem.Inflight())
		}
		q.Release(1)
		q.Release(2)
	})
}

// No barging: while someone waits, TryAcquire and a new Acquire do not take
// a freed permit.
func TestNoBarging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 2)
		q := newQueue(t, sem)
		q.TryAcquire(2)
		big := goAcquire(context.Background(), q.def, 2)
		q.Release(1)
		if q.TryAcquire(1) {
			t.Fatal("TryAcquire barged past a waiter")
		}
		late := goAcquire(context.Background(), q.def, 1)
		if late.finished() {
			t.Fatal("Acquire barged past a waiter")
		}
		q.Release(1)
		synctest.Wait()
		if !big.finished() || big.err != nil || late.finished() {
			t.Fatal("the head waiter should have been served, and only it")
		}
		q.Release(2)
		synctest.Wait()
		q.Release(1)
		sem.noneHeld()
	})
}

// Capacity freed outside the queue (a limit increase, a direct release on the
// semaphore) wakes waiters through the capacity hook.
func TestHookWakesOnLimitIncrease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem)
		sem.TryAcquire(1)
		a := goAcquire(context.Background(), q.def, 1)
		b := goAcquire(context.Background(), q.def, 1)
		if err := sem.SetLimit(3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !a.finished() || !b.finished() || a.err != nil || b.err != nil {
			t.Fatal("limit increase did not wake both waiters")
		}
		sem.Release(1)
		q.Release(1)
		q.Release(1)
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q, _ := New(sem)
		q.TryAcquire(1)
		a := goAcquire(context.Background(), q.def, 1)
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !errors.Is(a.err, ErrClosed) || errors.Is(a.err, ErrShed) {
			t.Fatalf("waiter at Close: %v", a.err)
		}
		if err := q.Acquire(context.Background(), 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("Acquire after Close: %v", err)
		}
		if q.TryAcquire(1) {
			t.Fatal("TryAcquire after Close")
		}
		q.Release(1)
		if sem.Inflight() != 0 || q.Close() != nil {
			t.Fatal("release after close")
		}
	})
}

func TestDeadlineAware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, WithDeadlineAware())
		q.TryAcquire(1)
		// Teach the queue its drain rate: one grant every 10ms.
		for range 3 {
			c := goAcquire(context.Background(), q.def, 1)
			time.Sleep(10 * time.Millisecond)
			q.Release(1)
			synctest.Wait()
			if !c.finished() {
				t.Fatal("not served")
			}
		}
		// Two waiters ahead: about 20ms to drain.
		w1 := goAcquire(context.Background(), q.def, 1)
		w2 := goAcquire(context.Background(), q.def, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := q.Acquire(ctx, 1); !errors.Is(err, ErrDeadline) {
			t.Fatalf("got %v, want ErrDeadline", err)
		}
		if time.Since(start) != 0 || q.Stats().DeadlineRejected != 1 {
			t.Fatal("ErrDeadline should come at once, and be counted")
		}
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		w3 := goAcquire(ctx2, q.def, 1)
		if w3.finished() {
			t.Fatalf("a request with time to spare was rejected: %v", w3.err)
		}
		for range 3 {
			q.Release(1)
			synctest.Wait()
		}
		for _, c := range []*call{w1, w2, w3} {
			if !c.finished() || c.err != nil {
				t.Fatalf("waiter not served: %v", c.err)
			}
		}
		q.Release(1)
		sem.noneHeld()
	})
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bareAdmitter has no capacity hook and no Limit: the queue still works,
// woken only by releases made through it.
type bareAdmitter struct{ s *concurrency.Semaphore }

func (b bareAdmitter) TryAcquire(n int64) bool { return b.s.TryAcquire(n) }
func (b bareAdmitter) Release(n int64)         { b.s.Release(n) }

func TestAdmitterWithoutHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem, _ := concurrency.NewSemaphore(1)
		q := newQueue(t, bareAdmitter{sem})
		q.TryAcquire(1)
		a := goAcquire(context.Background(), q.def, 1)
		b := goAcquire(context.Background(), q.def, 1)
		sem.SetLimit(2) // not signalled: nobody is woken yet
		synctest.Wait()
		if a.finished() {
			t.Fatal("woken without a hook?")
		}
		q.Release(1) // a release through the queue serves both now
		synctest.Wait()
		if !a.finished() || !b.finished() || a.err != nil || b.err != nil {
			t.Fatal("waiters not served after a release through the queue")
		}
		q.Release(1)
		q.Release(1)
		if sem.Inflight() != 0 {
			t.Fatal("leak")
		}
		// The hook stays free for someone else.
		if err := sem.OnCapacity(func() {}); err != nil {
			t.Fatal(err)
		}
	})
}

// The same handoff through a plain *Semaphore, the direct-call path.
func TestHandoffOnPlainSemaphore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem, _ := concurrency.NewSemaphore(2)
		q := newQueue(t, sem)
		q.TryAcquire(2)
		var calls []*call
		for range 4 {
			calls = append(calls, goAcquire(context.Background(), q.def, 1))
		}
		for i := range calls {
			q.Release(1)
			synctest.Wait()
			for j, c := range calls {
				if c.finished() != (j <= i) {
					t.Fatalf("after %d releases waiter %d finished=%v", i+1, j, c.finished())
				}
			}
		}
		q.Release(2)
		if sem.Inflight() != 0 || q.Stats().Granted != 4 {
			t.Fatalf("inflight %d, stats %+v", sem.Inflight(), q.Stats())
		}
	})
}

// Under LIFO a full queue sheds its oldest waiter for a newcomer of equal
// priority; under FIFO it turns the newcomer away.
func TestFullQueueShedsTheLastServed(t *testing.T) {
	for _, tc := range []struct {
		order       Order
		displaced   bool
		newcomerErr error
	}{
		{FIFO, false, ErrQueueFull},
		{LIFO, true, nil},
	} {
		t.Run(tc.order.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sem := newSem(t, 1)
				q := newQueue(t, sem, WithOrder(tc.order), WithMaxLength(2))
				q.TryAcquire(1)
				old := goAcquire(context.Background(), q.def, 1)
				mid := goAcquire(context.Background(), q.def, 1)
				late := goAcquire(context.Background(), q.def, 1)
				if got := errors.Is(old.err, ErrDisplaced); got != tc.displaced {
					t.Fatalf("oldest waiter displaced = %v (err %v), want %v", got, old.err, tc.displaced)
				}
				if tc.newcomerErr != nil && !errors.Is(late.err, tc.newcomerErr) {
					t.Fatalf("newcomer: %v, want %v", late.err, tc.newcomerErr)
				}
				for _, c := range []*call{old, mid, late} {
					c.cancel()
				}
				synctest.Wait()
				q.Release(1)
				if sem.Inflight() != 0 || q.Len() != 0 {
					t.Fatal("leak")
				}
			})
		})
	}
}
