package queueing

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"pgregory.net/rapid"
)

type pending struct {
	c     *call
	lane  Lane
	n     int64
	stop  context.CancelFunc // of the timeout context, if any
	limit int64              // the semaphore's limit when the call was made
}

type holding struct {
	lane Lane
	n    int64
}

// Any interleaving of acquire, try-acquire, cancel, timeout, release, limit
// change and the passing of time, under any discipline: permits are
// conserved (the semaphore's inflight is exactly what callers hold),
// admissions never pass the limit (checked admitter), every waiter ends
// with nil, its context's error or a shed error, and no waiter stays
// blocked while capacity is free except behind the waiter that is served
// first and does not fit (head-of-line order) or by its reserve. A limit
// decrease is not signalled by the semaphore; with a reserve it can make
// the head waiter ineligible and so let the one behind it go, which the
// queue sees at its next event: the check is skipped until then. The queue
// reaches the semaphore through the gated hook, the plain hook or no hook;
// without a hook a limit increase is not signalled either.
func TestQueueProperty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Wrapped: rapid asks a *testing.T for its deadline, which a
		// bubble forbids.
		rapid.Check(inBubble{t}, func(rt *rapid.T) { queueProperty(rt) })
	})
}

// inBubble hides *testing.T's Deadline from rapid inside a synctest bubble.
type inBubble struct{ *testing.T }

func queueProperty(rt *rapid.T) {
	sem := newSem(rt, rapid.Int64Range(1, 4).Draw(rt, "limit"))
	opts := []Option{
		WithOrder(Order(rapid.IntRange(0, 2).Draw(rt, "order"))),
		WithMaxLength(rapid.IntRange(1, 5).Draw(rt, "maxLen")),
	}
	if rapid.Bool().Draw(rt, "maxWait") {
		opts = append(opts, WithMaxWait(time.Duration(rapid.IntRange(1, 30).Draw(rt, "wait"))*time.Millisecond))
	}
	if rapid.Bool().Draw(rt, "codel") {
		opts = append(opts, WithCoDel(5*time.Millisecond, 20*time.Millisecond))
	}
	if rapid.Bool().Draw(rt, "reserve") {
		opts = append(opts, WithReserve(0.5, Critical))
	}
	if rapid.Bool().Draw(rt, "deadlineAware") {
		opts = append(opts, WithDeadlineAware())
	}
	var adm Admitter = sem
	hook := rapid.SampledFrom([]string{"gated", "plain", "none"}).Draw(rt, "hook")
	switch hook {
	case "plain":
		adm = plainHook{sem}
	case "none":
		adm = noHook{sem}
	}
	q, err := New(adm, opts...)
	if err != nil {
		rt.Fatal(err)
	}
	defer q.Close()
	lane := func() Lane {
		return mustLane(rt, q, Priority(rapid.IntRange(-1, 3).Draw(rt, "prio")), "")
	}
	var waiting []pending
	var held []holding
	settle := func() {
		synctest.Wait()
		var still []pending
		for _, p := range waiting {
			if !p.c.finished() {
				if p.n > p.limit {
					rt.Fatalf("a request of %d above the limit %d waits", p.n, p.limit)
				}
				still = append(still, p)
				continue
			}
			p.stop()
			if p.n > p.limit && !errors.Is(p.c.err, ErrTooLarge) {
				rt.Fatalf("a request of %d above the limit %d ended with %v, want ErrTooLarge", p.n, p.limit, p.c.err)
			}
			switch err := p.c.err; {
			case err == nil:
				held = append(held, holding{p.lane, p.n})
			case errors.Is(err, ErrShed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			case errors.Is(err, ErrTooLarge) && p.n > p.limit:
			default:
				rt.Fatalf("unexpected error %v", err)
			}
		}
		waiting = still
	}
	stale := false // a limit decrease the queue has not seen yet
	check := func() {
		var sum int64
		for _, h := range held {
			sum += h.n
		}
		if in := sem.Inflight(); in != sum {
			rt.Fatalf("inflight %d but callers hold %d", in, sum)
		}
		if n := q.Len(); n != len(waiting) {
			rt.Fatalf("queue length %d, %d callers blocked", n, len(waiting))
		}
		// The first waiter in service order that its reserve allows must
		// not fit: otherwise it is blocked while capacity is free.
		if stale {
			return
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		q.line.each(q.lifoLocked(clock.Now()), func(w *waiter) bool {
			if !q.rulesOKLocked(w.lane, w.n) {
				return true
			}
			if w.n <= sem.Available() {
				rt.Fatalf("waiter of %d blocked with %d available", w.n, sem.Available())
			}
			return false
		})
	}
	for range rapid.IntRange(1, 40).Draw(rt, "steps") {
		op := rapid.IntRange(0, 6).Draw(rt, "op")
		if op <= 2 {
			stale = false // every call into the queue runs a grant pass
		}
		switch op {
		case 0, 1: // acquire, some with a timeout
			ctx := context.Background()
			var cancel context.CancelFunc = func() {}
			if rapid.Bool().Draw(rt, "ctxTimeout") {
				ctx, cancel = context.WithTimeout(ctx, time.Duration(rapid.IntRange(1, 40).Draw(rt, "timeout"))*time.Millisecond)
			}
			l, n := lane(), rapid.Int64Range(1, 3).Draw(rt, "n")
			limit := sem.Limit()
			waiting = append(waiting, pending{goAcquire(ctx, l, n), l, n, cancel, limit})
		case 2:
			l, n := lane(), rapid.Int64Range(1, 3).Draw(rt, "n")
			if l.TryAcquire(n) {
				held = append(held, holding{l, n})
			}
		case 3:
			if len(held) > 0 {
				i := rapid.IntRange(0, len(held)-1).Draw(rt, "release")
				held[i].lane.Release(held[i].n)
				stale = false
				held = append(held[:i], held[i+1:]...)
			}
		case 4:
			if len(waiting) > 0 {
				waiting[rapid.IntRange(0, len(waiting)-1).Draw(rt, "cancel")].c.cancel()
				stale = false
			}
		case 5:
			newLimit := rapid.Int64Range(1, 5).Draw(rt, "newLimit")
			switch old := sem.Limit(); {
			case newLimit < old:
				stale = true
			case newLimit > old:
				stale = hook == "none" // an increase runs the capacity hook, if any
			}
			if err := sem.SetLimit(newLimit); err != nil {
				rt.Fatal(err)
			}
		case 6:
			time.Sleep(time.Duration(rapid.IntRange(1, 25).Draw(rt, "sleep")) * time.Millisecond)
		}
		settle()
		check()
	}
	for _, p := range waiting {
		p.c.cancel()
	}
	settle()
	for _, h := range held {
		h.lane.Release(h.n)
	}
	held = nil
	if len(waiting) != 0 || sem.Inflight() != 0 || q.Len() != 0 {
		rt.Fatalf("at rest: %d waiting, inflight %d, len %d", len(waiting), sem.Inflight(), q.Len())
	}
}
