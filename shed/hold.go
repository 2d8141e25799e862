package shed

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
)

// acquire takes a Global Concurrency or Adaptive permit for a, waiting up
// to the rule's MaxWait. It reports whether it did, and for a refusal the
// Retry-After hint; the error is ctx's when ctx ended while waiting.
func (c *Controller) acquire(ctx context.Context, a *ticket, r *rule, i int) (bool, time.Duration, error) {
	if r.lim != nil {
		req := r.adaptiveRequest(a)
		if dl, ok := ctx.Deadline(); ok {
			req.Deadline = a.now + int64(time.Until(dl))
		}
		tok, err := r.lim.TryAcquireAt(a.now, req)
		if errors.Is(err, adaptive.ErrLimited) && r.MaxWait > 0 && !r.dry {
			tok, err = c.waitAdaptive(ctx, a, r, req)
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, 0, ctx.Err()
			}
			return false, r.shedRetryAfter(), nil
		}
		a.tokens = append(a.tokens, tok)
		a.adaptives = append(a.adaptives, i)
		return true, 0, nil
	}
	if r.queue == nil || r.dry {
		if !r.sem.TryAcquire(a.semShard, a.cost) {
			return false, c.semHint(r, a.cost), nil
		}
		a.sems = append(a.sems, i)
		return true, 0, nil
	}
	lane := r.lane(a)
	if lane.TryAcquire(a.cost) {
		a.sems = append(a.sems, i)
		return true, 0, nil
	}
	start := c.now()
	err := lane.Acquire(ctx, a.cost)
	waited := max(0, c.now()-start)
	a.ctr[cQueueWaits].Add(1)
	a.ctr[cQueueWaitNs].Add(waited)
	if c.answer.obs != nil {
		c.answer.obs.ObserveQueueWait(r.Name, time.Duration(waited), err == nil)
	}
	switch {
	case err == nil:
		a.sems = append(a.sems, i)
		return true, 0, nil
	case ctx.Err() != nil:
		return false, 0, ctx.Err()
	}
	a.ctr[cQueueShed].Add(1)
	return false, c.semHint(r, a.cost), nil
}

// shedRetryAfter is the Retry-After of an attempt an Adaptive rule r
// sheds: when the Limiter expects a request to be served, at least the
// shortest a header says.
func (r *rule) shedRetryAfter() time.Duration { return max(shedHint, r.lim.PredictedLatency()) }

// semHint is the Retry-After of a full semaphore: a hint, unless the cost
// can never fit.
func (c *Controller) semHint(r *rule, cost int64) time.Duration {
	if cost > r.Limit {
		return ratelimit.Never
	}
	return shedHint
}

// waitAdaptive waits up to r.MaxWait for an adaptive permit.
func (c *Controller) waitAdaptive(ctx context.Context, a *ticket, r *rule, req adaptive.Request) (adaptive.Token, error) {
	wctx, cancel := context.WithTimeout(ctx, r.MaxWait)
	defer cancel()
	start := c.now()
	tok, err := r.lim.Acquire(wctx, req)
	waited := max(0, c.now()-start)
	a.ctr[cQueueWaits].Add(1)
	a.ctr[cQueueWaitNs].Add(waited)
	if c.answer.obs != nil {
		c.answer.obs.ObserveQueueWait(r.Name, time.Duration(waited), err == nil)
	}
	if err != nil && ctx.Err() == nil {
		a.ctr[cQueueShed].Add(1)
	}
	return tok, err
}

// rollback gives back what a took before a later rule rejected it: Global
// rate charges are refunded (and d's figures for them corrected),
// concurrency permits released.
func (c *Controller) rollback(a *ticket, d *Decision) {
	for _, ch := range a.rated {
		if !c.cancelReserved(a, ch.rule) {
			a.set.rules[ch.rule].rate.RefundTo(ch.from, a.now, a.cost)
		}
		if d.rule == ch.rule {
			d.Remaining = min(d.Limit, d.Remaining+a.cost)
		}
	}
	a.rated = a.rated[:0]
	if a.stored {
		c.undoStore(a) // admitted by the store, then rejected after a wait
	}
	c.release(a, adaptive.Ignore)
}

// release returns every permit a holds: adaptive tokens with outcome o,
// semaphore permits, store leases.
func (c *Controller) release(a *ticket, o Outcome) { c.releaseAt(a, 0, o) }

// releaseAt is release at now (0: the Controller's clock, read only when
// an adaptive token or a lease needs it).
func (c *Controller) releaseAt(a *ticket, now int64, o Outcome) {
	if len(a.tokens) > 0 || len(a.leases) > 0 {
		if now == 0 {
			now = c.now()
		}
		for _, t := range a.tokens {
			t.DoneAt(now, o)
		}
		for _, l := range a.leases {
			if err := c.storage.store.Release(context.Background(), l, now); err != nil {
				// Expired (its permits came back by themselves) or a
				// store that failed: the lease lapses at its TTL.
				a.ctr[cLeaseLost].Add(1)
			}
		}
		clear(a.tokens)
		a.tokens, a.leases, a.adaptives = a.tokens[:0], a.leases[:0], a.adaptives[:0]
	}
	for _, i := range a.sems {
		r := &a.set.rules[i]
		if r.queue != nil && !r.dry { // a dry-run rule takes its permits from sem itself
			r.lane(a).Release(a.cost)
		} else {
			r.sem.Release(a.semShard, a.cost)
		}
	}
	a.sems = a.sems[:0]
	a.rated = a.rated[:0]
}

// end ends an admitted attempt that its caller alone holds: it reports o,
// gives back the charges of rules that do not count status (Rule.Count; a
// negative status is unknown: every charge stands) and returns every
// permit, at now (0: the Controller's clock). Token.Done calls it once it
// has moved a.gen on; the middleware, which hands out no Token for its
// attempts and ends each once, calls it directly: a.gen stays, and a Token
// of an earlier use of the ticket was made stale by its own Done.
func (c *Controller) end(a *ticket, now int64, o Outcome, status int) {
	if !a.active {
		return
	}
	if status >= 0 && a.set.counting {
		if now == 0 {
			now = c.now()
		}
		c.refundUncounted(a, now, status)
	}
	if len(a.sems)|len(a.tokens)|len(a.leases) != 0 { // what releaseAt returns: often nothing
		c.releaseAt(a, now, o)
	}
	a.rated = a.rated[:0]
	a.active = false
	a.ctr[cFinished].Add(1)
}

// finish is end, then put, for a Token's attempt. The usual one, decided
// on the short path (ticket.bare) and holding nothing but charges that
// stand, ends in this frame.
func (c *Controller) finish(a *ticket, now int64, o Outcome, status int) {
	// Anything more for end (a refund, a permit) or put (a key, the
	// request's parts, the middleware's writer) takes the long way.
	if !a.active || !a.bare || status >= 0 && a.set.counting ||
		len(a.sems)|len(a.tokens)|len(a.leases)|len(a.buf) != 0 || a.reqParts != nil || a.w.ResponseWriter != nil {
		c.end(a, now, o, status)
		c.put(a)
		return
	}
	// end's and put's steps for it, in their order.
	a.rated = a.rated[:0]
	a.active = false
	a.ctr[cFinished].Add(1)
	a.bare, a.set = false, nil
	c.pool.Put(a)
}

// served is end, then put, for the middleware's admitted attempt a, whose
// handler has returned: a.w.status is what it answered (0: nothing, a
// 200), ctx its request's context. It has no Token, so no gen to move on
// (see end). The outcome (outcomeOfStatus, which asks ctx) is found only
// for an adaptive token, the one thing that takes it; the usual attempt,
// decided on the short path (ticket.bare) and holding nothing but charges
// that stand, ends in this frame, as finish ends a Token's.
func (c *Controller) served(ctx context.Context, a *ticket) {
	status := a.w.status
	if status == 0 {
		status = http.StatusOK // a handler that wrote nothing answered 200
	}
	if !a.active || !a.bare || a.set.counting || len(a.sems)|len(a.tokens)|len(a.leases)|len(a.buf) != 0 || a.reqParts != nil {
		o := Success // for nothing: only an adaptive token takes the outcome
		if len(a.tokens) > 0 {
			o = outcomeOfStatus(a.w.status, ctx)
		}
		c.end(a, 0, o, status)
		c.put(a)
		return
	}
	// end's and put's steps for it, in their order.
	a.rated = a.rated[:0]
	a.active = false
	a.ctr[cFinished].Add(1)
	a.bare, a.set = false, nil
	a.w.ResponseWriter, a.w.status = nil, 0
	c.pool.Put(a)
}
