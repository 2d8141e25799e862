package shed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/store"
)

// shedHint is the Retry-After of a rejection that has no exact figure (a
// full concurrency limit, a failed store): the smallest a header can say.
const shedHint = time.Second

// attempt is the pooled per-request state: the identity keys, the store
// request and result, and what the attempt holds until it is done.
type attempt struct {
	c     *Controller
	shard int
	// set is the rule set the attempt was decided on: what it holds is
	// given back to that set's rules even if the Controller's moved on.
	set *ruleSet
	// gen tells a live Token from a stale copy: Done moves it on once.
	gen atomic.Uint64
	// epoch is the counter the decision entered (see Controller.enter).
	epoch int

	at   Attempt
	cost int64
	now  int64
	// buf holds the identity keys; keys are strings over it (see key), so
	// it is not written again until the attempt is done.
	buf  []byte
	keys [Tenant + 1]struct{ start, end int }

	req     store.Request
	res     store.Result
	hitRule [store.MaxHits]int

	// Held until done: Global rate rules charged (given back on a later
	// rejection), Global concurrency permits, adaptive tokens, leases.
	rated     []int
	sems      []int
	tokens    []adaptive.Token
	adaptives []int // the rules of tokens
	leases    []store.Lease
	active    bool

	w    statusWriter // the middleware's
	slab headerSlab   // the middleware's header values
}

func (c *Controller) get() *attempt { return c.pool.Get().(*attempt) }

// maxPooledBuf is the largest key buffer kept in the pool: a request with
// huge identities must not pin its buffer for the life of the process.
const maxPooledBuf = 4 << 10

// put returns a to the pool; it holds nothing.
func (c *Controller) put(a *attempt) {
	a.at = Attempt{}
	a.set = nil
	a.buf = a.buf[:0]
	if cap(a.buf) > maxPooledBuf {
		a.buf = make([]byte, 0, 256)
	}
	a.keys = [Tenant + 1]struct{ start, end int }{}
	a.w = statusWriter{}
	c.pool.Put(a)
}

// buildKey builds the store key of identity id in buf, once, and reports
// whether the attempt has that identity. keyString reads it.
func (a *attempt) buildKey(id Identity) bool {
	k := &a.keys[id]
	if k.end == 0 {
		start := len(a.buf)
		switch id {
		case IP:
			a.buf = appendIPKey(a.buf, a.at.IP)
		case User:
			if a.at.User == "" {
				return false
			}
			a.buf = a.c.appendID(append(a.buf, "user:"...), a.at.User)
		case APIKey:
			if a.at.APIKey == "" {
				return false
			}
			a.buf = a.c.hasher.AppendSumString(append(a.buf, "key:"...), a.at.APIKey)
		case Tenant:
			if a.at.Tenant == "" {
				return false
			}
			a.buf = a.c.appendID(append(a.buf, "tenant:"...), a.at.Tenant)
		default:
			return false
		}
		// buf may have moved: earlier keys are re-derived by keyString from
		// the offsets, never kept across an append.
		k.start, k.end = start, len(a.buf)
	}
	return true
}

// MaxIdentity is the longest user or tenant id that reaches a store key as
// given; a longer one is replaced by "#" and its keyed hash
// (fingerprint.SumLen bytes), so that a store key is at most
// MaxIdentityKey bytes whatever a caller passes.
const MaxIdentity = 64

// MaxIdentityKey bounds the store key of a user or tenant identity:
// "tenant:" and at most MaxIdentity bytes.
const MaxIdentityKey = len("tenant:") + MaxIdentity

// appendID appends id to dst as a store key's identity: as given up to
// MaxIdentity bytes, else "#" and its keyed hash. Ids that start with "#"
// are hashed whatever their length, so a kept id never equals a hash.
func (c *Controller) appendID(dst []byte, id string) []byte {
	if len(id) <= MaxIdentity && id[0] != '#' {
		return append(dst, id...)
	}
	return c.hasher.AppendSumString(append(dst, '#'), id)
}

// appendIPKey appends the store key of client address ip: "ip:" and the
// address as netip.Addr.AppendTo writes it (IPv4 formatted here, faster).
func appendIPKey(dst []byte, ip netip.Addr) []byte {
	dst = append(dst, "ip:"...)
	if !ip.Is4() {
		if !ip.IsValid() {
			return append(dst, "unknown"...) // no address: one shared key, named
		}
		return ip.AppendTo(dst)
	}
	o := ip.As4()
	dst = appendDecimal(dst, int64(o[0]))
	for _, x := range o[1:] {
		dst = appendDecimal(append(dst, '.'), int64(x))
	}
	return dst
}

// keyString returns the built key of id as a string sharing buf's memory
// (unsafe.String), valid while buf is not appended to. Stores do not
// retain a request's keys (store.Store's contract), penalty boxes copy
// what they keep (Penalties), and a lease's key is used by Release before
// the attempt goes back to the pool; so the bytes never change under a
// live string, and no key is allocated.
func (a *attempt) keyString(id Identity) string {
	k := a.keys[id]
	return unsafe.String(&a.buf[k.start], k.end-k.start)
}

// decideIn decides a on the rule set in force, counted among the running
// decisions of the epoch (see storeLimits) until its store call is done.
// With a request r, the set's categorizer gives a's category: one rule set
// for the whole request, its categorizer and its rules.
func (c *Controller) decideIn(ctx context.Context, a *attempt, r *http.Request, d *Decision) error {
	c.enter(a)
	defer c.leave(a) // also when the categorizer or the decision hook panics
	a.set = c.set.Load()
	if r != nil && a.set.categorized() { // some rule names a category
		a.at.Category = a.set.cat(r)
	}
	return c.decide(ctx, a, d)
}

// decide runs the attempt a.at through the plan of its category in a.set
// (see decideIn) and writes the decision to d (by pointer: a Decision is
// some 150 bytes). On an allowed decision the attempt holds its permits
// until done; otherwise it holds nothing.
func (c *Controller) decide(ctx context.Context, a *attempt, d *Decision) error {
	now := a.at.Now
	if now == 0 {
		now = c.now()
	}
	cost := a.at.Cost
	if cost == 0 {
		cost = 1
	}
	if cost < 0 || now < 0 || a.at.Priority < Sheddable || a.at.Priority > CriticalPlus {
		if a.at.Priority < Sheddable || a.at.Priority > CriticalPlus {
			return fmt.Errorf("shed: unknown priority %v", a.at.Priority)
		}
		if now < 0 {
			// A store would refuse it, and a fail-open rule would then
			// admit everything: a bad clock is this decision's error.
			return fmt.Errorf("shed: negative now %d", now)
		}
		return fmt.Errorf("shed: negative cost %d", cost)
	}
	a.now, a.cost = now, cost
	p := a.set.planFor(a.at.Category, a.at.Tier)
	*d = Decision{Allowed: true, rule: -1, plan: p, wall: c.wallAnchor + (now - c.monoAnchor)}

	// Identity keys first: the strings over buf are taken after the last
	// append.
	checkPenalty := c.pen != nil && a.buildKey(c.penID)
	for _, i := range p.stored {
		a.buildKey(a.set.rules[i].Identity)
	}

	// 1. The penalty box.
	if checkPenalty {
		if left, in := c.pen.Check(a.keyString(c.penID), now); in {
			if !c.dryPen {
				d.Allowed, d.Kind, d.RetryAfter = false, Penalized, max(left, 1)
				c.done(a, d)
				return nil
			}
			c.markDry(a, d, "", Penalized)
		}
	}

	// 2. Global rate rules, in this process.
	for _, i := range p.rates {
		r := &a.set.rules[i]
		rd := r.rate.AllowN(now, cost)
		if !rd.Allowed() {
			if r.dry {
				c.markDry(a, d, r.Name, r.kind)
				a.set.rules[i].ctr.add(a.shard, rWouldReject, 1)
				continue
			}
			c.rollback(a, d)
			c.rejectBy(a, d, i, rd)
			return nil
		}
		a.rated = append(a.rated, i)
		c.consider(d, i, rd)
		if r.early > 0 {
			c.earlyCheck(a, r, "", rd)
		}
	}

	// 3. Global concurrency and adaptive limits, in this process.
	for _, i := range p.concs {
		r := &a.set.rules[i]
		ok, hint, err := c.acquire(ctx, a, r, i)
		if err != nil {
			c.rollback(a, d)
			*d = Decision{rule: -1}
			return err
		}
		if !ok {
			if r.dry {
				c.markDry(a, d, r.Name, r.kind)
				a.set.rules[i].ctr.add(a.shard, rWouldReject, 1)
				continue
			}
			c.rollback(a, d)
			c.rejectBy(a, d, i, concurrency.Decision{RetryAfter: max(hint, 1)}) // > 0: a rejection
			return nil
		}
	}

	// 4. Per-key rules, in one store call.
	if len(p.stored) > 0 {
		if ok, err := c.decideStore(ctx, a, p, d); !ok {
			return err
		}
	}

	for _, i := range a.rated {
		a.set.rules[i].ctr.add(a.shard, rAllowed, 1)
	}
	for _, i := range a.sems {
		a.set.rules[i].ctr.add(a.shard, rAllowed, 1)
	}
	for _, i := range a.adaptives {
		a.set.rules[i].ctr.add(a.shard, rAllowed, 1)
	}
	if d.rule >= 0 {
		d.Rule = a.set.rules[d.rule].Name
	}
	a.rated = a.rated[:0]
	a.active = true // counted by done as admitted: inflight is admitted - finished
	c.done(a, d)
	return nil
}

// acquire takes a Global Concurrency or Adaptive permit for a, waiting up
// to the rule's MaxWait. It reports whether it did, and for a refusal the
// Retry-After hint; the error is ctx's when ctx ended while waiting.
func (c *Controller) acquire(ctx context.Context, a *attempt, r *rule, i int) (bool, time.Duration, error) {
	if r.lim != nil {
		req := adaptive.Request{}
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
			return false, max(shedHint, r.lim.PredictedLatency()), nil
		}
		a.tokens = append(a.tokens, tok)
		a.adaptives = append(a.adaptives, i)
		return true, 0, nil
	}
	if r.queue == nil || r.dry {
		if !r.sem.TryAcquire(a.cost) {
			return false, c.semHint(r, a.cost), nil
		}
		a.sems = append(a.sems, i)
		return true, 0, nil
	}
	lane := r.lanes[a.at.Priority.lane()]
	if lane.TryAcquire(a.cost) {
		a.sems = append(a.sems, i)
		return true, 0, nil
	}
	start := c.now()
	err := lane.Acquire(ctx, a.cost)
	c.ctr.add(a.shard, cQueueWaits, 1)
	c.ctr.add(a.shard, cQueueWaitNs, max(0, c.now()-start))
	switch {
	case err == nil:
		a.sems = append(a.sems, i)
		return true, 0, nil
	case ctx.Err() != nil:
		return false, 0, ctx.Err()
	}
	c.ctr.add(a.shard, cQueueShed, 1)
	return false, c.semHint(r, a.cost), nil
}

// semHint is the Retry-After of a full semaphore: a hint, unless the cost
// can never fit.
func (c *Controller) semHint(r *rule, cost int64) time.Duration {
	if cost > r.Limit {
		return concurrency.Never
	}
	return shedHint
}

// waitAdaptive waits up to r.MaxWait for an adaptive permit.
func (c *Controller) waitAdaptive(ctx context.Context, a *attempt, r *rule, req adaptive.Request) (adaptive.Token, error) {
	wctx, cancel := context.WithTimeout(ctx, r.MaxWait)
	defer cancel()
	start := c.now()
	tok, err := r.lim.Acquire(wctx, req)
	c.ctr.add(a.shard, cQueueWaits, 1)
	c.ctr.add(a.shard, cQueueWaitNs, max(0, c.now()-start))
	if err != nil && ctx.Err() == nil {
		c.ctr.add(a.shard, cQueueShed, 1)
	}
	return tok, err
}

// decideStore decides the per-key rules of p in one store call (more only
// when a dry-run rule would reject: it is left out and the rest decided
// again, so that it is charged exactly as enforcement would charge it).
// It reports false, with the rejection in d, when the attempt is rejected,
// and false with ctx's error when ctx ended before the store could decide
// (what it held is given back then).
func (c *Controller) decideStore(ctx context.Context, a *attempt, p *plan, d *Decision) (bool, error) {
	a.req.N, a.req.Now = 0, a.now
	for _, i := range p.stored {
		r := &a.set.rules[i]
		if !a.buildKey(r.Identity) {
			continue // the attempt has no such identity
		}
		a.hitRule[a.req.N] = i
		key := a.keyString(r.Identity)
		id := r.id
		if a.set.over != nil { // a key of this rule may have an override
			if o, ok := a.set.over[i][key]; ok && a.now < o.until {
				id = o.id
			}
		}
		a.req.Add(id, key, a.cost)
	}
	for a.req.N > 0 {
		err := c.store.Decide(ctx, &a.req, &a.res)
		if err != nil {
			return c.storeFailed(ctx, a, d, err)
		}
		if !a.res.Allowed {
			h := a.res.Decider
			i := a.hitRule[h]
			r := &a.set.rules[i]
			rd := a.res.Hits[h].Decision
			full := a.res.Hits[h].Overflow // the table is full, not the client over its limit
			if full {
				r.ctr.add(a.shard, rOverflowed, 1)
			}
			if !r.dry {
				c.rollback(a, d)
				if full {
					c.shedOverflow(a, d, i)
				} else {
					c.rejectBy(a, d, i, rd)
				}
				return false, nil
			}
			kind := r.kind
			if full {
				kind = Shedding
			}
			c.markDry(a, d, r.Name, kind)
			a.set.rules[i].ctr.add(a.shard, rWouldReject, 1)
			// Decide the others again without it.
			copy(a.req.Hits[h:a.req.N], a.req.Hits[h+1:a.req.N])
			copy(a.hitRule[h:a.req.N], a.hitRule[h+1:a.req.N])
			a.req.N--
			continue
		}
		for j := range a.res.N {
			i := a.hitRule[j]
			hr := &a.res.Hits[j]
			a.set.rules[i].ctr.add(a.shard, rAllowed, 1)
			if hr.Overflow {
				a.set.rules[i].ctr.add(a.shard, rOverflowed, 1)
			}
			if hr.Lease.Held() {
				a.leases = append(a.leases, hr.Lease)
			}
			if a.set.rules[i].Algorithm.rate() {
				c.consider(d, i, hr.Decision)
				if r := &a.set.rules[i]; r.early > 0 {
					c.earlyCheck(a, r, a.req.Hits[j].Key, hr.Decision)
				}
			}
		}
		break
	}
	return true, nil
}

// storeFailed applies the failure modes of the store rules of a request
// the store could not decide: rejected (503) when one of them fails closed
// and is not in dry-run, admitted past them otherwise. When ctx has ended
// (the client gave up, maybe causing the failure) there is nobody to admit:
// it gives back what the attempt held and returns ctx's error.
func (c *Controller) storeFailed(ctx context.Context, a *attempt, d *Decision, err error) (bool, error) {
	c.ctr.add(a.shard, cStoreErrors, 1)
	if cerr := ctx.Err(); cerr != nil {
		c.rollback(a, d)
		*d = Decision{rule: -1}
		return false, cerr
	}
	hits := a.hitRule[:a.req.N]
	for _, i := range hits {
		if r := &a.set.rules[i]; r.Failure == FailClosed && !r.dry {
			a.set.rules[i].ctr.add(a.shard, rFailClosed, 1)
			c.rollback(a, d)
			d.Allowed, d.Kind, d.Rule, d.RetryAfter = false, Shedding, r.Name, shedHint
			d.Warning, d.WarningRule = false, ""
			c.done(a, d)
			return false, nil
		}
	}
	for _, i := range hits {
		r := &a.set.rules[i]
		if r.Failure == FailClosed { // in dry-run: it would have rejected
			c.markDry(a, d, r.Name, Shedding)
			a.set.rules[i].ctr.add(a.shard, rWouldReject, 1)
		}
		a.set.rules[i].ctr.add(a.shard, rFailOpen, 1)
	}
	d.FailedOpen = true
	c.ctr.add(a.shard, cFailedOpen, 1)
	c.logFailOpen(a.now, a.set.rules[hits[0]].Name, err)
	return true, nil
}

// shedOverflow rejects a for rule i, whose store table is full of live
// keys: the server's condition, so a 503 with the short hint, no strike,
// logged once per second. What a held is given back already.
func (c *Controller) shedOverflow(a *attempt, d *Decision, i int) {
	r := &a.set.rules[i]
	r.ctr.add(a.shard, rRejected, 1)
	d.Allowed, d.Kind, d.Rule, d.RetryAfter = false, Shedding, r.Name, shedHint
	d.Warning, d.WarningRule = false, ""
	c.logOverflow(a.now, r.Name)
	c.done(a, d)
}

// consider folds an admitted rate decision of rule i into d: the rule with
// the fewest remaining reports in the headers; the first past its soft
// limit warns.
func (c *Controller) consider(d *Decision, i int, rd concurrency.Decision) {
	r := &d.plan.rules[i]
	if d.rule < 0 || rd.Remaining < d.Remaining {
		d.rule, d.Limit, d.Remaining, d.Reset = i, rd.Limit, rd.Remaining, rd.ResetAfter
	}
	if !d.Warning && rd.Limit-rd.Remaining >= r.softAt {
		d.Warning, d.WarningRule = true, r.Name
	}
}

// markDry records a would-be rejection of a dry-run rule (or penalty).
func (c *Controller) markDry(a *attempt, d *Decision, name string, k Kind) {
	if !d.DryRun {
		d.DryRun, d.DryRunRule, d.DryRunKind = true, name, k
		c.ctr.add(a.shard, cDryRun, 1)
	}
	c.logDryRun(a.now, name, k)
}

// rejectBy makes the rejection of rule i with its decision rd, after the
// attempt gave back what it held.
func (c *Controller) rejectBy(a *attempt, d *Decision, i int, rd concurrency.Decision) {
	r := &a.set.rules[i]
	a.set.rules[i].ctr.add(a.shard, rRejected, 1)
	d.Allowed, d.Kind, d.Rule, d.RetryAfter = false, r.kind, r.Name, max(rd.RetryAfter, 1)
	if r.Algorithm == Concurrency && rd.RetryAfter != concurrency.Never {
		// A full per-key concurrency limit frees a permit when one of the
		// client's own requests ends, which nobody can predict; the store's
		// figure is when the oldest lease would lapse (LeaseTTL, meant for
		// crashed holders, often minutes). Send the same hint as a full
		// Global limit instead.
		d.RetryAfter = min(d.RetryAfter, shedHint)
	}
	d.Warning, d.WarningRule = false, ""
	if r.Algorithm.rate() {
		d.rule, d.Limit, d.Remaining, d.Reset = i, rd.Limit, rd.Remaining, rd.ResetAfter
		if d.RetryAfter != concurrency.Never {
			d.Reset = d.RetryAfter // when this client is served again (Decision.Reset)
		}
	}
	if d.Kind == OverLimit && c.pen != nil {
		if a.buildKey(c.penID) {
			c.pen.Strike(a.keyString(c.penID), a.now)
			c.ctr.add(a.shard, cStrikes, 1)
		}
	}
	c.done(a, d)
}

// done counts d and hands it to the hook.
func (c *Controller) done(a *attempt, d *Decision) {
	if d.Allowed {
		c.ctr.add(a.shard, cAdmitted, 1)
	} else {
		c.ctr.add(a.shard, [...]int{cAdmitted, cOverLimit, cShedding, cPenalized}[d.Kind], 1)
	}
	if c.hook != nil {
		c.hook(*d)
	}
}

// rollback gives back what a took before a later rule rejected it: Global
// rate charges are refunded (and d's figures for them corrected),
// concurrency permits released.
func (c *Controller) rollback(a *attempt, d *Decision) {
	for _, i := range a.rated {
		a.set.rules[i].rate.Refund(a.now, a.cost)
		if d.rule == i {
			d.Remaining = min(d.Limit, d.Remaining+a.cost)
		}
	}
	a.rated = a.rated[:0]
	c.release(a, adaptive.Ignore)
}

// release returns every permit a holds: adaptive tokens with outcome o,
// semaphore permits, store leases.
func (c *Controller) release(a *attempt, o Outcome) { c.releaseAt(a, 0, o) }

// releaseAt is release at now (0: the Controller's clock, read only when
// an adaptive token or a lease needs it).
func (c *Controller) releaseAt(a *attempt, now int64, o Outcome) {
	if len(a.tokens) > 0 || len(a.leases) > 0 {
		if now == 0 {
			now = c.now()
		}
		for _, t := range a.tokens {
			t.DoneAt(now, o)
		}
		for _, l := range a.leases {
			if err := c.store.Release(context.Background(), l, now); err != nil {
				// Expired (its permits came back by themselves) or a
				// store that failed: the lease lapses at its TTL.
				c.ctr.add(a.shard, cLeaseLost, 1)
			}
		}
		clear(a.tokens)
		a.tokens, a.leases, a.adaptives = a.tokens[:0], a.leases[:0], a.adaptives[:0]
	}
	for _, i := range a.sems {
		r := &a.set.rules[i]
		if r.queue != nil {
			r.lanes[a.at.Priority.lane()].Release(a.cost)
		} else {
			r.sem.Release(a.cost)
		}
	}
	a.sems = a.sems[:0]
}

// finish ends an admitted attempt once: it reports o and returns every
// permit. It reports false when the attempt was finished already.
func (c *Controller) finish(a *attempt, gen uint64, o Outcome) bool {
	return c.finishAt(a, gen, 0, o)
}

// finishAt is finish at now (0: the Controller's clock).
func (c *Controller) finishAt(a *attempt, gen uint64, now int64, o Outcome) bool {
	if !a.gen.CompareAndSwap(gen, gen+1) {
		c.ctr.add(a.shard, cDoubleDone, 1)
		return false
	}
	if a.active {
		c.releaseAt(a, now, o)
		a.active = false
		c.ctr.add(a.shard, cFinished, 1)
	}
	return true
}

// Token is the permit of an admitted attempt. Done it exactly once when the
// work ends, on every path (error, timeout, panic: use defer), or the
// permits it holds stay taken (store leases only until their TTL). A Token
// is a small value; only one copy may be done, and a second Done is
// harmless: it releases nothing and is counted in Stats.DoubleDone. The
// zero Token, returned with a rejection, does nothing.
type Token struct {
	a   *attempt
	gen uint64
}

// Done reports the outcome of the work to the adaptive limits (Success:
// its latency, from the decision to now on the Controller's clock, is a
// sample; Dropped: a congestion signal; Ignore: neither) and returns the
// attempt's concurrency permits and leases. Safe for concurrent use; it
// blocks only as long as a network store takes to release a lease.
func (t Token) Done(o Outcome) { t.DoneAt(0, o) }

// DoneAt is Done at now (monotonic nanoseconds, on the clock the attempt
// was decided on): for simulations that pass Attempt.Now. Zero means the
// Controller's clock.
func (t Token) DoneAt(now int64, o Outcome) {
	if t.a == nil {
		return
	}
	a := t.a
	if a.c.finishAt(a, t.gen, now, o) {
		a.c.put(a)
	}
}

// outcomeOfStatus maps a handler's response status and its request's
// context to the outcome reported to adaptive limits: 5xx and a deadline
// are drops (overload signals), a client that went away says nothing, and
// anything else is a success whose latency counts.
func outcomeOfStatus(status int, ctx context.Context) Outcome {
	if status >= 500 {
		return Dropped
	}
	if err := ctx.Err(); err != nil {
		return adaptive.OutcomeOf(err)
	}
	return Success
}
