package queueing

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

func TestShareIsGraded(t *testing.T) {
	for _, tc := range []struct {
		p    Priority
		want int
	}{
		{-1, 0}, {Sheddable, 3}, {SheddablePlus, 6}, {Critical, 9}, {CriticalPlus, 9}, {100, 9},
	} {
		if got := Share(tc.p, 9); got != tc.want {
			t.Errorf("Share(%v, 9) = %d, want %d", tc.p, got, tc.want)
		}
	}
	// Graded: the share never falls as priority rises.
	for p := Priority(-3); p < 6; p++ {
		if Share(p, 100) > Share(p+1, 100) {
			t.Errorf("Share(%v) > Share(%v)", p, p+1)
		}
	}
}

// Higher priorities are served first; the lowest classes are turned away
// first as the queue fills (graded), and a full queue sheds its lowest,
// newest waiter for a more important arrival.
func TestPriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, WithMaxLength(3))
		shed := mustLane(t, q, Sheddable, "")
		plus := mustLane(t, q, SheddablePlus, "")
		crit := mustLane(t, q, Critical, "")
		cplus := mustLane(t, q, CriticalPlus, "")
		q.TryAcquire(1)
		bg := context.Background()

		s1 := goAcquire(bg, shed, 1) // len 0 < 1: joins
		if s1.finished() {
			t.Fatal("sheddable not queued")
		}
		s2 := goAcquire(bg, shed, 1) // len 1 >= Share(sheddable,3)=1, nothing lower
		if !errors.Is(s2.err, ErrQueueFull) {
			t.Fatalf("second sheddable: %v, want ErrQueueFull", s2.err)
		}
		p1 := goAcquire(bg, plus, 1) // len 1 < 2
		c1 := goAcquire(bg, crit, 1) // len 2 < 3
		if s1.finished() || p1.finished() || c1.finished() {
			t.Fatal("waiters should be queued")
		}
		// Full: critical-plus displaces the lowest, newest waiter (s1).
		cp := goAcquire(bg, cplus, 1)
		synctest.Wait()
		if !errors.Is(s1.err, ErrDisplaced) || !errors.Is(s1.err, ErrShed) {
			t.Fatalf("sheddable waiter: %v, want ErrDisplaced", s1.err)
		}
		// Served by priority: critical-plus, critical, sheddable-plus.
		for i, want := range []*call{cp, c1, p1} {
			q.Release(1)
			synctest.Wait()
			if !want.finished() || want.err != nil {
				t.Fatalf("release %d: expected waiter not served (%v)", i, want.err)
			}
		}
		// The permit is held by p1's lane now.
		plus.Release(1)
		if sem.Inflight() != 0 || q.Len() != 0 {
			t.Fatalf("inflight %d len %d", sem.Inflight(), q.Len())
		}
		if st := q.Stats(); st.Shed != 2 || st.QueueFull != 1 || st.Displaced != 1 || st.Granted != 3 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// WithReserve keeps a share of the limit for critical work.
func TestReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 10)
		q := newQueue(t, sem, WithReserve(0.2, Critical))
		low := mustLane(t, q, SheddablePlus, "")
		crit := mustLane(t, q, Critical, "")
		n := 0
		for low.TryAcquire(1) {
			n++
		}
		if n != 8 {
			t.Fatalf("non-critical work took %d of 10, want 8 (20%% reserved)", n)
		}
		// A waiting non-critical request does not block critical work.
		w := goAcquire(context.Background(), low, 1)
		if !crit.TryAcquire(2) {
			t.Fatal("critical work could not use the reserve")
		}
		if w.finished() {
			t.Fatal("non-critical waiter entered the reserve")
		}
		crit.Release(2)
		synctest.Wait()
		if w.finished() {
			t.Fatal("non-critical waiter entered the reserve after a release")
		}
		low.Release(1)
		synctest.Wait()
		if !w.finished() || w.err != nil {
			t.Fatalf("non-critical waiter not served within its share: %v", w.err)
		}
		low.Release(8)
		sem.noneHeld()
		defer func() {
			if recover() == nil {
				t.Error("releasing more than the lane holds did not panic")
			}
		}()
		low.Release(1)
	})
}
