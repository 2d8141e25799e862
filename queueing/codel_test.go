package queueing

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

const ms = int64(time.Millisecond)

// The pure state machine against the rules in the reference: if the queue
// has not been empty within the last interval, the timeout is the target,
// else the interval.
func TestCoDelRules(t *testing.T) {
	c, err := NewCoDel(DefaultTarget, DefaultInterval)
	if err != nil {
		t.Fatal(err)
	}
	const t0 = 1_000 * ms
	if c.Standing(t0) || c.Timeout(t0) != DefaultInterval {
		t.Fatal("a CoDel that never saw the queue must not call it standing")
	}
	c.Empty(t0)
	for _, tc := range []struct {
		at       int64
		standing bool
	}{
		{t0, false},
		{t0 + 99*ms, false},
		{t0 + 100*ms, true}, // not empty in the last 100ms
		{t0 + 500*ms, true},
	} {
		if got := c.Standing(tc.at); got != tc.standing {
			t.Errorf("Standing(t0+%dms) = %v, want %v", (tc.at-t0)/ms, got, tc.standing)
		}
		want := DefaultInterval
		if tc.standing {
			want = DefaultTarget
		}
		if got := c.Timeout(tc.at); got != want {
			t.Errorf("Timeout(t0+%dms) = %v, want %v", (tc.at-t0)/ms, got, want)
		}
	}
	// Standing: a waiter older than the target expires, a younger one not.
	now := t0 + 200*ms
	if !c.Expired(now-5*ms, now) || c.Expired(now-4*ms, now) {
		t.Error("standing queue: expiry should be at the 5ms target")
	}
	// The queue empties: the interval is the timeout again.
	c.Empty(now)
	if c.Expired(now-50*ms, now) || !c.Expired(now-100*ms, now) {
		t.Error("drained queue: expiry should be at the 100ms interval")
	}
	// Empty never moves time backwards.
	c.Empty(now - 50*ms)
	if c.Standing(now + 99*ms) {
		t.Error("an older Empty moved lastEmpty back")
	}
}

func TestCoDelQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, WithCoDel(DefaultTarget, DefaultInterval))
		q.TryAcquire(1)

		// Not standing: the interval is the timeout.
		start := time.Now()
		err := q.Acquire(context.Background(), 1)
		if !errors.Is(err, ErrCongested) || time.Since(start) != DefaultInterval {
			t.Fatalf("got %v after %v, want ErrCongested after the 100ms interval", err, time.Since(start))
		}

		// Build a standing queue: a long waiter keeps it non-empty.
		long := goAcquire(context.Background(), q.def, 1)
		time.Sleep(99 * time.Millisecond)
		// Now the queue has been non-empty for 99ms, not yet standing.
		short := goAcquire(context.Background(), q.def, 1)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		// At 100ms the queue turns standing: the long waiter (100ms old)
		// is past every timeout; short is 1ms old, within the 5ms target.
		if !long.finished() || !errors.Is(long.err, ErrCongested) {
			t.Fatalf("long waiter: %v", long.err)
		}
		if short.finished() {
			t.Fatal("short waiter shed before its target")
		}
		// Under the standing queue, short is shed at 5ms of age, not 100ms.
		time.Sleep(4 * time.Millisecond)
		synctest.Wait()
		if !short.finished() || !errors.Is(short.err, ErrCongested) {
			t.Fatalf("short waiter under a standing queue: finished=%v err=%v", short.finished(), short.err)
		}
		// The queue drained when short left: the interval is back.
		start = time.Now()
		err = q.Acquire(context.Background(), 1)
		if !errors.Is(err, ErrCongested) || time.Since(start) != DefaultInterval {
			t.Fatalf("after draining: %v after %v", err, time.Since(start))
		}
		if st := q.Stats(); st.Shed != 4 || st.Congested != 4 {
			t.Fatalf("stats %+v, want 4 shed by CoDel", st)
		}
		q.Release(1)
		sem.noneHeld()
	})
}

// A waiter served in time is not affected by CoDel.
func TestCoDelServesInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, WithCoDel(DefaultTarget, DefaultInterval), WithOrder(AdaptiveLIFO))
		q.TryAcquire(1)
		c := goAcquire(context.Background(), q.def, 1)
		time.Sleep(50 * time.Millisecond)
		q.Release(1)
		synctest.Wait()
		if !c.finished() || c.err != nil {
			t.Fatalf("waiter within the interval: %v", c.err)
		}
		q.Release(1)
	})
}

// Deadline is the exact instant Expired turns true, for any history.
func TestCoDelDeadlineMatchesExpired(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		target := rapid.Int64Range(1, 50).Draw(t, "target")
		interval := rapid.Int64Range(target+1, 200).Draw(t, "interval")
		c, _ := NewCoDel(time.Duration(target), time.Duration(interval))
		empty := rapid.Int64Range(1, 1000).Draw(t, "lastEmpty")
		c.Empty(empty)
		enq := empty + rapid.Int64Range(0, 300).Draw(t, "enqueuedAfter")
		d := c.Deadline(enq)
		for now := enq; now <= enq+interval+1; now++ {
			if got, want := c.Expired(enq, now), now >= d; got != want {
				t.Fatalf("now=%d: Expired=%v but Deadline=%d", now, got, d)
			}
		}
	})
}
