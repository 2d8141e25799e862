package queueing

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// forevers are durations that put now+d past MaxInt64 for the monotonic
// clock, which starts at 2^62 (about 146 years before MaxInt64) and, inside
// a synctest bubble, about 27 years lower: 200 years wraps in both.
var forevers = []time.Duration{time.Duration(math.MaxInt64), 200 * 365 * 24 * time.Hour}

// TestMaxWaitForeverNeverExpires: a max wait too long to add to now means
// the waiter never times out, neither on its timer nor when the next event
// (an arrival, a release) sweeps the line; only its context ends the wait.
func TestMaxWaitForeverNeverExpires(t *testing.T) {
	for _, d := range forevers {
		foreverWaiter(t, "max wait", WithMaxWait(d))
	}
}

// TestCoDelForeverIntervalNeverExpires: a CoDel interval (and target) too
// long to add to now means a waiter of a queue that is not standing is
// never shed; only its context ends the wait.
func TestCoDelForeverIntervalNeverExpires(t *testing.T) {
	for _, d := range forevers {
		foreverWaiter(t, "CoDel", WithCoDel(d-1, d))
	}
}

// foreverWaiter queues one waiter on a queue built with o, makes events
// sweep the line for an hour, and checks that only the waiter's context
// ended its wait, after exactly that hour.
func foreverWaiter(t *testing.T, name string, o Option) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 1)
		q := newQueue(t, sem, o)
		q.TryAcquire(1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		start := time.Now()
		w := goAcquire(ctx, q.def, 1)
		for range 4 {
			time.Sleep(10 * time.Minute)
			if q.TryAcquire(1) { // an event: the queue sweeps its line first
				t.Fatalf("%s: TryAcquire passed the waiter", name)
			}
			synctest.Wait()
			if w.finished() {
				t.Fatalf("%s: the waiter left after %v with %v", name, time.Since(start), w.err)
			}
		}
		synctest.Wait()
		time.Sleep(time.Hour)
		synctest.Wait()
		if !w.finished() || !errors.Is(w.err, context.DeadlineExceeded) {
			t.Fatalf("%s: waiter finished %v with %v, want the context's deadline", name, w.finished(), w.err)
		}
		if st := q.Stats(); st.Shed != 0 {
			t.Fatalf("%s: stats %+v, want nothing shed", name, st)
		}
		q.Release(1)
	})
}

// TestCoDelDeadlineSaturates: Deadline never reports an instant before the
// waiter's arrival; a sum past MaxInt64 is MaxInt64, never.
func TestCoDelDeadlineSaturates(t *testing.T) {
	now := int64(1<<62 + 1000)
	for _, d := range forevers {
		c, err := NewCoDel(d-1, d)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Deadline(now); got != math.MaxInt64 {
			t.Errorf("interval %v, no empty seen: Deadline %d, want MaxInt64", d, got)
		}
		c.Empty(now)
		if got := c.Deadline(now); got != math.MaxInt64 || c.Expired(now, now+int64(time.Hour)) {
			t.Errorf("interval %v after Empty: Deadline %d (want MaxInt64), expired after 1h %v",
				d, got, c.Expired(now, now+int64(time.Hour)))
		}
	}
}

// TestPacerForeverPeriodNeverWrapsSlots: a pacer whose slots run past
// MaxInt64 hands out MaxInt64 (never) for them rather than wrapping to the
// past and letting a burst through.
func TestPacerForeverPeriodNeverWrapsSlots(t *testing.T) {
	for _, period := range forevers {
		p, err := NewPacer(1, period)
		if err != nil {
			t.Fatal(err)
		}
		now := int64(1 << 62)
		if at := p.ReserveAt(now); at != now {
			t.Fatalf("period %v: first slot at %d, want now", period, at)
		}
		for i := range 4 {
			if at := p.ReserveAt(now); at != math.MaxInt64 {
				t.Fatalf("period %v: slot %d at %d, want MaxInt64", period, i+1, at)
			}
			if p.AllowAt(now + 1) {
				t.Fatalf("period %v: AllowAt admitted a second slot in one period", period)
			}
		}
	}
}

// TestPacerReservationsFarAheadNeverWrap: reserving slot after slot without
// waiting runs the schedule past MaxInt64 after a while; from there every
// slot is never, and none lands in the past.
func TestPacerReservationsFarAheadNeverWrap(t *testing.T) {
	p, err := NewPacer(1, 50*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now, last := int64(1<<62), int64(0)
	for i := range 10 {
		at := p.ReserveAt(now)
		if at < last || at < now {
			t.Fatalf("slot %d at %d, before the previous one (%d) or now", i, at, last)
		}
		last = at
	}
	if last != math.MaxInt64 {
		t.Fatalf("the tenth 50-year slot is at %d, want MaxInt64", last)
	}
}
