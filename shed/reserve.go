package shed

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// Short waits on rate rules. A token-bucket or fixed-window rule with
// MaxWait does not reject a request that it would admit within MaxWait: it
// reserves the request's exact slot (ratelimit.GCRA.ReserveN, charged now
// as if admitted then; for a window, the start of a later one) and the
// request waits for it. The wait ends early only
// when the request's context does; the reservation is then cancelled. A
// request whose deadline falls before its slot is rejected at once, with
// Retry-After, and reserves nothing; so is one that finds the rule's
// waiters at their bound (Rule.QueueLength).

// reserver is the rate of a Global rate rule that can reserve.
type reserver interface {
	reserve(now, n int64, minWait, maxWait time.Duration) ratelimit.Reservation
	cancel(now, n int64, r ratelimit.Reservation)
}

func (r *bucketRate) reserve(now, n int64, minWait, maxWait time.Duration) ratelimit.Reservation {
	return r.g.ReserveN(&r.state.s, now, n, minWait, maxWait)
}

func (r *bucketRate) cancel(now, n int64, rv ratelimit.Reservation) {
	r.g.Cancel(&r.state.s, now, n, rv)
}

// reserveAlgo is a window configuration that can reserve (a fixed window).
type reserveAlgo[S any] interface {
	ReserveN(s *S, now, n int64, minWait, maxWait time.Duration) ratelimit.Reservation
	Cancel(s *S, now, n int64, r ratelimit.Reservation)
}

// reserve and cancel of a window rate are its algorithm's: Rule.reserves
// lets only a fixed window get here.
func (r *stateRate[S, A]) reserve(now, n int64, minWait, maxWait time.Duration) ratelimit.Reservation {
	return any(r.algo).(reserveAlgo[S]).ReserveN(&r.state.s, now, n, minWait, maxWait)
}

func (r *stateRate[S, A]) cancel(now, n int64, rv ratelimit.Reservation) {
	any(r.algo).(reserveAlgo[S]).Cancel(&r.state.s, now, n, rv)
}

// reserve runs on the calendar's window clock; for windows of a fixed
// length (the only ones that reserve) it is the time shifted, so waits on
// it are real ones.
func (c *calendarRate) reserve(now, n int64, minWait, maxWait time.Duration) ratelimit.Reservation {
	at := c.clock.At(now)
	rv := c.rate.(reserver).reserve(at, n, minWait, maxWait)
	rv.Decision = c.clock.Decision(now, at, rv.Decision)
	return rv
}

func (c *calendarRate) cancel(now, n int64, rv ratelimit.Reservation) {
	c.rate.(reserver).cancel(c.clock.At(now), n, rv)
}

// reserves reports whether lr can reserve: a rate of one state (a bucket,
// a window); the sharded ones (ratelimit.ShardedBucket, ShardedWindow)
// cannot tell the next slot, so a rule on one is charged at once.
func reserves(lr localRate) bool {
	if c, ok := lr.(*calendarRate); ok {
		lr = c.rate
	}
	switch lr.(type) {
	case *bucketRate, *stateRate[ratelimit.FixedWindowState, *ratelimit.FixedWindow]:
		return true
	}
	return false
}

// waiters bounds the requests waiting for one rule's reserved slots. A
// rule kept across a Reload keeps it, so that the bound holds across it.
type waiters struct {
	n   atomic.Int64
	max int64
}

// enter takes a waiter's place, reporting false when all are taken.
func (w *waiters) enter() bool {
	if w.n.Add(1) > w.max {
		w.n.Add(-1)
		return false
	}
	return true
}

func (w *waiters) leave() { w.n.Add(-1) }

// reserved is a Global rate rule's reservation that a ticket holds.
type reserved struct {
	rule int
	r    ratelimit.Reservation
	// waiter says that the rule itself made the attempt wait (it has
	// MaxWait and took a waiter's place), as opposed to a rule charged at
	// the slot another rule set.
	waiter bool
}

// decideRate decides Global rate rule i for a, when the rule may wait or
// an earlier rule made a wait. Without a wait so far: at once when there
// is room. Otherwise a reservation from the slot a already waits for (an
// earlier rule's), within the rule's MaxWait and the request's deadline,
// or exactly at that slot when the rule does not wait that long (the
// attempt starts then anyway, so that is when it must have room). A rule
// that cannot reserve (a sliding window or log, calendar months) or is in
// dry-run is decided at once. It also says where the charge was taken
// (localRate.AllowNShard): a rule that reserves is never sharded, so a
// reservation's Origin is the zero one.
func (c *Controller) decideRate(ctx context.Context, a *ticket, r *rule, i int) (ratelimit.Decision, ratelimit.Origin) {
	if !r.canReserve || r.dry {
		return r.rate.AllowNShard(a.semShard, a.now, a.cost)
	}
	if a.wait == 0 {
		rd, from := r.rate.AllowNShard(a.semShard, a.now, a.cost)
		if rd.Allowed() || r.waits == nil {
			return rd, from
		}
	}
	maxWait, waiter := a.wait, false
	if r.waits != nil && a.wait < r.MaxWait {
		// No time left before the deadline, or no room to wait: only the
		// slot a waits for anyway (at once without one, with the
		// bucket's exact Retry-After).
		if mw := min(r.MaxWait, a.deadlineLeft(ctx)); mw > a.wait && r.waits.enter() {
			maxWait, waiter = mw, true
		}
	}
	if maxWait == 0 {
		return r.rate.AllowNShard(a.semShard, a.now, a.cost)
	}
	rv := r.rate.(reserver).reserve(a.now, a.cost, a.wait, maxWait)
	if !rv.Allowed() || rv.Wait == 0 {
		if waiter {
			r.waits.leave()
		}
		return rv.Decision, 0
	}
	a.reserved = append(a.reserved, reserved{rule: i, r: rv, waiter: waiter})
	a.wait = max(a.wait, rv.Wait)
	return rv.Decision, 0
}

// replaceRates moves the charges of a's Global rate rules to a.wait, the
// later slot a per-key rule reserved, so that no rule sees the attempt
// start after its charge: each is cancelled and reserved again exactly at
// that slot (a charge at once is refunded first; while reservations are
// pending a refund gives nothing back, and that token is lost, never
// doubled). It reports false, having rolled a back and rejected it, when a
// rule has no room then.
func (c *Controller) replaceRates(a *ticket, d *Decision) bool {
	for k := 0; k < len(a.rated); k++ {
		i := a.rated[k].rule
		r := &a.set.rules[i]
		if !r.canReserve || r.dry {
			continue
		}
		h, slot := -1, time.Duration(0)
		for j := range a.reserved {
			if a.reserved[j].rule == i {
				h, slot = j, a.reserved[j].r.Wait
			}
		}
		if slot >= a.wait {
			continue
		}
		waiter := false
		if h >= 0 {
			waiter = a.reserved[h].waiter
			r.rate.(reserver).cancel(a.now, a.cost, a.reserved[h].r)
			a.reserved[h] = a.reserved[len(a.reserved)-1]
			a.reserved = a.reserved[:len(a.reserved)-1]
		} else {
			r.rate.RefundTo(a.rated[k].from, a.now, a.cost)
		}
		rv := r.rate.(reserver).reserve(a.now, a.cost, a.wait, a.wait)
		if !rv.Allowed() || rv.Wait == 0 {
			if waiter {
				r.waits.leave()
			}
			a.rated = append(a.rated[:k], a.rated[k+1:]...) // given back above
			c.rollback(a, d)
			c.rejectBy(a, d, i, rv.Decision)
			return false
		}
		a.reserved = append(a.reserved, reserved{rule: i, r: rv, waiter: waiter})
	}
	return true
}

// deadlineLeft returns how long a's context leaves from a.now: the longest
// wait a slot may need (MaxReserveWait when there is no deadline, zero when
// it has passed). It reads the clock once per attempt, only for rules that
// wait.
func (a *ticket) deadlineLeft(ctx context.Context) time.Duration {
	if !a.deadlineRead {
		a.deadlineRead, a.deadline = true, ratelimit.MaxReserveWait
		if dl, ok := ctx.Deadline(); ok {
			a.deadline = max(0, min(time.Until(dl), ratelimit.MaxReserveWait))
		}
	}
	return a.deadline
}

// storeMaxWait lets the hit just added for per-key rule r reserve (within
// MaxWait and the deadline) when a waiter's place is free.
func (c *Controller) storeMaxWait(ctx context.Context, a *ticket, r *rule) {
	if r.dry {
		return
	}
	if mw := min(r.MaxWait, a.deadlineLeft(ctx)); mw > 0 && r.waits.enter() {
		a.req.Hits[a.req.N-1].MaxWait = mw
		a.waitsStored = true
	}
}

// storeWaiters gives back the waiters' places of the hits of a.req that do
// not wait: all of them unless the store admitted the request (kept), and
// then those admitted at once.
func (c *Controller) storeWaiters(a *ticket, kept bool) {
	for j := range a.req.Hits[:min(a.req.N, store.MaxHits)] {
		if a.req.Hits[j].MaxWait > 0 && !(kept && a.res.Hits[j].Wait > 0) {
			a.req.Hits[j].MaxWait = 0
			a.set.rules[a.hitRule[j]].waits.leave()
		}
	}
	a.waitsStored = kept
}

// storeWaits calls f with each hit of a.req that reserved a slot, and its
// rule.
func (a *ticket) storeWaits(f func(r *rule, hr *store.HitResult)) {
	if !a.waitsStored {
		return
	}
	for j := range a.req.Hits[:a.req.N] {
		if a.req.Hits[j].MaxWait > 0 && a.res.Hits[j].Wait > 0 {
			f(&a.set.rules[a.hitRule[j]], &a.res.Hits[j])
		}
	}
}

// awaitSlot waits until the slot every rule reserved for a has come (a.wait
// after a.now), and reports false, having given back nothing, when ctx
// ended first: the caller rolls back, cancelling the reservations.
func (c *Controller) awaitSlot(ctx context.Context, a *ticket) bool {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		for _, h := range a.reserved {
			if h.waiter {
				a.set.rules[h.rule].ctr.add(a.shard, rWaitCancelled, 1)
			}
		}
		a.storeWaits(func(r *rule, _ *store.HitResult) { r.ctr.add(a.shard, rWaitCancelled, 1) })
		return false
	}
	waited := func(r *rule, wait time.Duration) {
		r.ctr.add(a.shard, rWaited, 1)
		r.ctr.add(a.shard, rWaitNs, int64(wait))
		r.waits.leave()
		if c.answer.obs != nil {
			c.answer.obs.ObserveQueueWait(r.Name, wait, true)
		}
	}
	for _, h := range a.reserved {
		if h.waiter {
			waited(&a.set.rules[h.rule], h.r.Wait)
		}
	}
	a.reserved = a.reserved[:0]
	a.storeWaits(func(r *rule, hr *store.HitResult) { waited(r, hr.Wait) })
	a.waitsStored = false
	if a.stored {
		// The slot has come: from here on every charge is an admission's,
		// refunded (Rule.Count, a rollback) as one.
		for j := range a.res.Hits[:a.res.N] {
			a.res.Hits[j].Wait, a.res.Hits[j].Reserved = 0, 0
		}
	}
	// The attempt starts at its slot: what it holds from here on is given
	// back at that time or later, on the Controller's clock, never at the
	// decision's now (a refund there would find the slots still pending).
	a.now += int64(a.wait)
	a.res.Now += int64(a.wait) // the store's admission is at the slot too
	return true
}

// undoStore gives back what the store charged for a, which is rejected
// after the store admitted it (its context ended while it waited, or a
// concurrency rule rejected it after the wait): reservations are
// cancelled, other charges refunded (store.Refunder; a store that cannot
// refund keeps them, counted in RuleStats.RefundsLost). Leases are
// released with a's other permits.
func (c *Controller) undoStore(a *ticket) {
	a.stored = false
	a.storeWaits(func(r *rule, hr *store.HitResult) {
		r.waits.leave()
		if c.answer.obs != nil {
			c.answer.obs.ObserveQueueWait(r.Name, hr.Wait, false)
		}
	})
	a.waitsStored = false
	n := 0
	for j := range a.req.N {
		// Not admitted after all: decideStore counted it.
		a.set.rules[a.hitRule[j]].ctr.add(a.shard, rAllowed, -1)
		if a.set.rules[a.hitRule[j]].Algorithm == Concurrency {
			continue
		}
		a.req.Hits[n], a.res.Hits[n], a.hitRule[n] = a.req.Hits[j], a.res.Hits[j], a.hitRule[j]
		n++
	}
	if n == 0 {
		return
	}
	a.req.N, a.res.N, a.req.Now = n, n, a.now // after a wait, its end (see awaitSlot)
	rf, ok := c.storage.store.(store.Refunder)
	if !ok || rf.Refund(context.Background(), &a.req, &a.res) != nil {
		for _, i := range a.hitRule[:n] {
			a.set.rules[i].ctr.add(a.shard, rRefundsLost, 1)
		}
	}
}

// cancelReserved gives back the reservations a holds, at now: the request
// will not run (a later rule rejected it, or its context ended while it
// waited). It reports which rules reserved, for rollback to skip their
// plain refund.
func (c *Controller) cancelReserved(a *ticket, i int) bool {
	for k, h := range a.reserved {
		if h.rule != i {
			continue
		}
		r := &a.set.rules[i]
		r.rate.(reserver).cancel(a.now, a.cost, h.r)
		if h.waiter {
			r.waits.leave()
			if c.answer.obs != nil {
				c.answer.obs.ObserveQueueWait(r.Name, h.r.Wait, false)
			}
		}
		a.reserved[k] = a.reserved[len(a.reserved)-1]
		a.reserved = a.reserved[:len(a.reserved)-1]
		return true
	}
	return false
}
