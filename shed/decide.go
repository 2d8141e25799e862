package shed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// shedHint is the Retry-After of a rejection that has no exact figure (a
// full concurrency limit, a failed store): the smallest a header can say.
const shedHint = time.Second

// decideIn decides a on the rule set in force, counted among the running
// decisions of the epoch (see storeLimits) until its store call is done
// when the set has per-key rules (see load).
// With a request r, the set's categorizer gives a's category: one rule set
// for the whole request, its categorizer and its rules.
//
// With peek, it peeks instead (see peek): nothing is charged or held.
func (c *Controller) decideIn(ctx context.Context, a *ticket, r *http.Request, d *Decision, peek bool) error {
	if c.answer.obs != nil && !peek {
		switch {
		case r != nil: // the middleware's askOf has just read the clock
			a.began = a.ask.Now
		case a.ask.Now == 0: // begin would read it: one reading for both
			a.ask.Now = c.now()
			a.began = a.ask.Now
		default: // the caller's instant, maybe on a clock of its own
			a.began = c.now()
		}
	}
	if c.load(a) {
		defer c.leave(a) // also when the categorizer or the decision hook panics
	}
	if r != nil && a.set.categorized() { // some rule names a category
		a.ask.Category = a.set.cat(r)
	}
	if r != nil && a.set.keyed != nil { // some rule's key reads the request
		a.readParts(&a.set.req, r)
	}
	if peek {
		return c.peek(ctx, a, d)
	}
	return c.decide(ctx, a, d)
}

// decide runs the attempt a.ask through the plan of its category in a.set
// (see decideIn) and writes the decision to d (by pointer: a Decision is
// some 150 bytes). On an allowed decision the attempt holds its permits
// until done; otherwise it holds nothing.
func (c *Controller) decide(ctx context.Context, a *ticket, d *Decision) error {
	p, err := c.begin(a, d)
	if err != nil {
		return err
	}
	now, cost := a.now, a.cost
	a.charged = cost
	a.wait, a.deadlineRead, a.stored, a.waitsStored = 0, false, false, false
	a.req.N, a.res.N = 0, 0 // no store hits, until storeHits: none of an earlier attempt of the ticket
	if a.ask.Tightened && c.suspicion != nil {
		a.ctr[cTightened].Add(1)
	}
	if p.local && c.pen == nil {
		c.decideLocal(a, p, d)
		return nil
	}
	checkPenalty := c.buildKeys(a, p)
	if p.fair {
		a.buildFairKeys(p)
	}
	if checkPenalty && c.storage.prefetch != nil {
		// The penalty check's lookup and the per-key rules' are
		// independent: ask for the latter's entries first, so that their
		// cache misses overlap.
		for _, i := range p.stored {
			if r := &a.set.rules[i]; r.Identity != Composite && a.buildKey(r.Identity) {
				c.storage.prefetch.Prefetch(r.id, a.keyString(r.Identity))
			}
		}
	}

	// 1. The penalty box.
	if checkPenalty {
		if left, in := c.pen.Check(a.keyString(c.penID), now); in {
			if !c.dryAll {
				d.Allowed, d.Kind, d.RetryAfter = false, Penalized, max(left, 1)
				c.done(a, d)
				return nil
			}
			c.markDry(a, d, "", Penalized)
		}
	}

	// 2. Global rate rules, in this process.
	if len(p.rates) > 0 && !c.decideRates(ctx, a, p, d) {
		return nil
	}

	// 3. Global concurrency and adaptive limits, in this process; for an
	// attempt that waits for a reserved rate slot, after the wait, so that
	// it holds no permit while it waits.
	late := a.wait > 0 || p.storeWaits
	if !late && len(p.concs) > 0 {
		if ok, err := c.decideConcs(ctx, a, p, d); !ok {
			return err
		}
	}

	// 4. Per-key rules, in one store call.
	if len(p.stored) > 0 {
		before := a.wait
		if ok, err := c.decideStore(ctx, a, p, d); !ok {
			return err
		}
		if a.wait > before && !c.replaceRates(a, d) {
			return nil // a Global rate rule has no room at the store's later slot
		}
	}

	if a.wait > 0 {
		if !c.awaitSlot(ctx, a) {
			c.rollback(a, d)
			*d = Decision{rule: -1}
			return ctx.Err()
		}
		// The headers speak from the slot on: the same reset instant, a
		// wait less away.
		d.Reset, d.wall = max(0, d.Reset-a.wait), d.wall+int64(a.wait)
	}
	if late && len(p.concs) > 0 {
		if ok, err := c.decideConcs(ctx, a, p, d); !ok {
			return err
		}
	}

	c.admit(a, d)
	return nil
}

// decideRates decides the Global rate rules of p, in this process, in
// order. It returns false when one rejected: d says so, and what the
// earlier rules took is given back.
func (c *Controller) decideRates(ctx context.Context, a *ticket, p *plan, d *Decision) bool {
	for _, i := range p.rates {
		r := &a.set.rules[i]
		var rd ratelimit.Decision
		var from ratelimit.Origin
		if r.waits == nil && a.wait == 0 {
			rd, from = r.rate.AllowNShard(a.semShard, a.now, a.cost)
		} else {
			rd, from = c.decideRate(ctx, a, r, i) // may reserve a later slot (reserve.go)
		}
		if !c.tookRate(a, d, r, i, rd, from) {
			return false
		}
	}
	return true
}

// tookRate applies rd, the decision of a's Global rate rule r (at index
// i), which took its units from o, to a and d: an admission is held and
// considered for d's figures; a
// rejection by a dry-run rule is marked and let pass; any other rejection
// gives back what a took and writes itself to d, and tookRate reports
// false.
func (c *Controller) tookRate(a *ticket, d *Decision, r *rule, i int, rd ratelimit.Decision, o ratelimit.Origin) bool {
	if !rd.Allowed() {
		if r.dry {
			c.dryReject(a, d, r, r.kind)
			return true
		}
		c.rollback(a, d)
		c.rejectBy(a, d, i, rd)
		return false
	}
	a.rated = append(a.rated, charge{i, o, a.now + int64(rd.ResetAfter)})
	c.consider(d, i, rd)
	if r.early > 0 {
		c.earlyCheck(a, r, "", rd)
	}
	return true
}

// admit ends d as an admission: every rule that admitted a counts it, and
// a holds what it took until done.
func (c *Controller) admit(a *ticket, d *Decision) {
	for _, ch := range a.rated {
		a.set.rules[ch.rule].ctr.add(a.shard, rAllowed, 1)
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
	// a.rated stays: the charges a Count rule may give back when done.
	a.stored = false // nothing to roll back any more
	a.active = true  // counted by done as admitted: inflight is admitted - finished
	c.done(a, d)
}

// dryReject marks d as a dry-run rejection by rule r, of kind k, and
// counts on r what it would have rejected.
func (c *Controller) dryReject(a *ticket, d *Decision, r *rule, k Kind) {
	c.markDry(a, d, r.Name, k)
	r.ctr.add(a.shard, rWouldReject, 1)
}

// decideLocal is decide for a plan of Global rules that never wait
// (plan.local) on a Controller without a penalty box: no key, no store
// call, no slot to reserve. The rate rules decide first, then the
// concurrency rules take their permits; when one rejects, what the
// earlier ones took is given back. It reads a.now and a.cost, and the
// rules from p (those of a.set).
func (c *Controller) decideLocal(a *ticket, p *plan, d *Decision) {
	rules, now, cost := p.rules, a.now, a.cost
	for _, i := range p.rates {
		r := &rules[i]
		// A local rule reserves no slot: none to wait for.
		rd, from := r.rate.AllowNShard(a.semShard, now, cost)
		if !c.tookRate(a, d, r, i, rd, from) {
			return
		}
	}
	for _, i := range p.concs {
		r := &rules[i]
		if !r.sem.TryAcquire(a.semShard, cost) {
			if r.dry {
				c.dryReject(a, d, r, r.kind)
				continue
			}
			c.rollback(a, d)
			c.rejectBy(a, d, i, ratelimit.Decision{RetryAfter: max(c.semHint(r, cost), 1)}) // > 0: a rejection
			return
		}
		a.sems = append(a.sems, i)
	}
	// admit, for what a local plan holds: no adaptive token, no store hit.
	for _, ch := range a.rated {
		rules[ch.rule].ctr.add(a.shard, rAllowed, 1)
	}
	for _, i := range a.sems {
		rules[i].ctr.add(a.shard, rAllowed, 1)
	}
	if d.rule >= 0 {
		d.Rule = rules[d.rule].Name
	}
	a.active = true // counted as admitted: inflight is admitted - finished
	c.admitted(a, d)
}

// decideLone is decideLocal for a local plan of rule r alone, at index
// i of its rules (plan.lone), in a straight line: nothing to give back on
// a rejection, one rule to count and name, no earlier rule to compare
// with (consider's figures are r's).
func (c *Controller) decideLone(a *ticket, r *rule, i int, d *Decision) {
	var rd ratelimit.Decision
	var from ratelimit.Origin
	if b, ok := r.rate.(*shardedBucketRate); ok { // the usual global cap: a direct call
		rd, from = b.b.AllowNShard(a.semShard, a.now, a.cost)
	} else {
		rd, _ = r.rate.AllowNShard(a.semShard, a.now, a.cost) // every other rate's Origin is the zero one
	}
	switch {
	case rd.Allowed():
		a.rated = append(a.rated, charge{i, from, a.now + int64(rd.ResetAfter)})
		d.rule, d.Limit, d.Remaining, d.Reset, d.Rule = i, rd.Limit, rd.Remaining, rd.ResetAfter, r.Name
		if rd.Limit-rd.Remaining >= r.softAt {
			d.Warning, d.WarningRule = true, r.Name
		}
		if r.early > 0 && pastHalf(rd, a.cost) {
			c.earlyCheck(a, r, "", rd)
		}
		r.ctr.add(a.shard, rAllowed, 1)
	case !r.dry:
		c.rejectBy(a, d, i, rd)
		return
	default:
		c.dryReject(a, d, r, r.kind)
	}
	a.active = true // counted as admitted: inflight is admitted - finished
	c.admitted(a, d)
}

// begin validates a.ask, sets a.now and a.cost (a zero cost is 1), starts
// d as an admission on the plan of a's category and tier, and marks a
// tightened attempt (Attempt.Tightened, WithSuspicion) in d and a.tight:
// the start that Decide and Peek share. The error, deciding nothing, is
// for a negative cost or now, an unknown priority or a weight out of
// range.
func (c *Controller) begin(a *ticket, d *Decision) (*plan, error) {
	now := a.ask.Now
	if now == 0 {
		now = c.now()
	}
	cost := a.ask.Cost
	if cost == 0 {
		cost = 1
	}
	if cost < 0 || now < 0 || a.ask.Priority < Sheddable || a.ask.Priority > CriticalPlus || uint(a.ask.Weight) > MaxWeight {
		if uint(a.ask.Weight) > MaxWeight {
			return nil, fmt.Errorf("shed: weight must be in [0, %d], got %d", MaxWeight, a.ask.Weight)
		}
		if a.ask.Priority < Sheddable || a.ask.Priority > CriticalPlus {
			return nil, fmt.Errorf("shed: unknown priority %v", a.ask.Priority)
		}
		if now < 0 {
			return nil, errNegativeNow(now)
		}
		return nil, fmt.Errorf("shed: negative cost %d", cost)
	}
	a.now, a.cost = now, cost
	p := a.set.planFor(a.ask.Category, a.ask.Tier)
	*d = Decision{Allowed: true, rule: -1, plan: p, wall: c.wallAnchor + (now - c.monoAnchor)}
	a.tight = false
	if a.ask.Tightened && c.suspicion != nil {
		d.Tightened, d.Suspicion = true, a.ask.reasons
		a.tight = c.tighten(a)
	}
	return p, nil
}

// errNegativeNow is the error of a decision at a negative now. A store
// would refuse it, and a fail-open rule would then admit everything: a bad
// clock is the decision's error.
func errNegativeNow(now int64) error { return fmt.Errorf("shed: negative now %d", now) }

// plain reports whether a is decided without the generic steps of
// decideIn, decide and begin, when its plan allows (see decidePlain): the
// Controller has no penalty box and no Observer, a is valid (begin's
// checks but the clock's) and not tightened by suspicion.
func (c *Controller) plain(a *Attempt) bool {
	return c.pen == nil && c.answer.obs == nil &&
		a.Cost >= 0 && a.Now >= 0 && a.Priority >= Sheddable && a.Priority <= CriticalPlus && uint(a.Weight) <= MaxWeight &&
		(!a.Tightened || c.suspicion == nil)
}

// decidePlain is decideAttempt (d the zero Decision) for a plain attempt
// a (see plain) whose plan p in s is local and s has no per-key rule (no
// epoch to count the decision in, see load): begin's start, then
// decideLocal (decideLone for a plan of one rate rule). It reads a in
// place and leaves t.ask zero (t.bare), as no step of a local plan reads
// it: the copy in and the clearing out are saved.
func (c *Controller) decidePlain(t *ticket, s *ruleSet, p *plan, a *Attempt, d *Decision) (Token, error) {
	now := a.Now
	if now == 0 {
		if now = c.now(); now < 0 {
			c.put(t)
			return Token{}, errNegativeNow(now)
		}
	}
	cost := a.Cost
	if cost == 0 {
		cost = 1
	}
	t.set, t.bare = s, true
	t.now, t.cost, t.charged = now, cost, cost
	// What decide resets, for what a local plan's rollback, Recost and
	// end read: no reserved slot, no store hit.
	t.wait, t.stored = 0, false
	t.req.N, t.res.N = 0, 0
	// begin's start of d, on the zero Decision (decideAttempt's d).
	d.Allowed, d.rule, d.plan, d.wall = true, -1, p, c.wallAnchor+(now-c.monoAnchor)
	if r := p.lone; r != nil {
		c.decideLone(t, r, p.loneAt, d)
	} else {
		c.decideLocal(t, p, d)
	}
	if !d.Allowed {
		c.put(t)
		return Token{}, nil
	}
	return Token{a: t, gen: t.gen.Load()}, nil
}

// decideLean is decidePlain for the middleware (see middleware.decide):
// it decides a request at now (> 0) on p, a local plan of s, whose rules
// read nothing of a.ask, and leaves a.ask zero (a.bare). The request's
// cost is 1 (no WithCost); the rejection of a rule stays in d, and a, for
// put, holds nothing then.
func (c *Controller) decideLean(a *ticket, s *ruleSet, p *plan, now int64, d *Decision) {
	a.set, a.bare = s, true
	a.now, a.cost, a.charged = now, 1, 1
	// What decide resets, for what a local plan's rollback, recost and
	// end read: no reserved slot, no store hit.
	a.wait, a.stored = 0, false
	a.req.N, a.res.N = 0, 0
	// begin's start of d, on the zero Decision (the middleware's d).
	d.Allowed, d.rule, d.plan, d.wall = true, -1, p, c.wallAnchor+(now-c.monoAnchor)
	if r := p.lone; r != nil {
		c.decideLone(a, r, p.loneAt, d)
	} else {
		c.decideLocal(a, p, d)
	}
}

// keyedOnly reports whether p holds per-key rules alone, none of which
// waits for its slot (decideKeyed): no Global rule to decide or roll
// back, no slot to wait for, no fair share.
func (p *plan) keyedOnly() bool {
	return len(p.stored) > 0 && len(p.rates)|len(p.concs) == 0 && !p.storeWaits && !p.fair
}

// decideKeyed is decide for an attempt a on p, a plan of per-key rules
// alone (p.keyedOnly), of a lean middleware (no penalty box, no
// suspicion; cost 1, a valid priority and weight) at a.ask.Now (> 0):
// begin's start, the keys, one store call, the admission. d is the zero
// Decision.
func (c *Controller) decideKeyed(ctx context.Context, a *ticket, p *plan, d *Decision) error {
	now := a.ask.Now
	a.now, a.cost, a.charged, a.tight = now, 1, 1, false
	a.wait, a.deadlineRead, a.stored, a.waitsStored = 0, false, false, false
	a.req.N, a.res.N = 0, 0 // no store hits, until storeHits: none of an earlier attempt of the ticket
	d.Allowed, d.rule, d.plan, d.wall = true, -1, p, c.wallAnchor+(now-c.monoAnchor)
	c.buildKeys(a, p)
	if ok, err := c.decideStore(ctx, a, p, d); !ok {
		return err
	}
	c.admit(a, d)
	return nil
}

// buildKeys builds a's identity keys for the penalty box and p's per-key
// rules, first: the strings over buf are taken after the last append. It
// reports whether the penalty box is to be asked (the Controller has one
// and a has its identity).
func (c *Controller) buildKeys(a *ticket, p *plan) bool {
	checkPenalty := c.pen != nil && a.buildKey(c.penID)
	for j, i := range p.stored {
		if id := a.set.rules[i].Identity; id != Composite {
			a.buildKey(id)
		} else {
			a.buildComposite(j, a.set.keyed[i])
		}
	}
	return checkPenalty
}

// decideConcs takes the permits of p's Global concurrency and adaptive
// rules. It reports false, with the rejection in d (or the error of a
// context that ended while it waited), when one of them rejects a; what a
// held is given back then.
func (c *Controller) decideConcs(ctx context.Context, a *ticket, p *plan, d *Decision) (bool, error) {
	for _, i := range p.concs {
		r := &a.set.rules[i]
		ok, hint, err := c.acquire(ctx, a, r, i)
		if err != nil {
			c.rollback(a, d)
			*d = Decision{rule: -1}
			return false, err
		}
		if !ok {
			if r.dry {
				c.dryReject(a, d, r, r.kind)
				continue
			}
			c.rollback(a, d)
			c.rejectBy(a, d, i, ratelimit.Decision{RetryAfter: max(hint, 1)}) // > 0: a rejection
			return false, nil
		}
	}
	return true, nil
}

// decideStore decides the per-key rules of p in one store call (more only
// when a dry-run rule would reject: it is left out and the rest decided
// again, so that it is charged exactly as enforcement would charge it).
// It reports false, with the rejection in d, when the attempt is rejected,
// and false with ctx's error when ctx ended before the store could decide
// (what it held is given back then).
func (c *Controller) decideStore(ctx context.Context, a *ticket, p *plan, d *Decision) (bool, error) {
	c.storeHits(ctx, a, p, a.cost, false)
	for a.req.N > 0 {
		err := c.storage.store.Decide(ctx, &a.req, &a.res)
		if a.waitsStored {
			c.storeWaiters(a, err == nil && a.res.Allowed)
			if errors.Is(err, errors.ErrUnsupported) {
				continue // a store that cannot reserve: decide at once
			}
		}
		if err != nil {
			return c.storeFailed(ctx, a, d, err)
		}
		if !a.res.Allowed {
			h := a.res.Decider
			i := a.hitRule[h]
			r := &a.set.rules[i]
			rd := a.res.Hits[h].Decision
			full := a.res.Hits[h].Overflow // the table is full, not the client over its limit
			prefix := a.onPrefix(r, h)     // decided on its network prefix already
			if full && !prefix && c.overflowToPrefix(a, h, i) {
				continue // the same request again, this key on its prefix
			}
			if full && !prefix {
				r.ctr.add(a.shard, rOverflowed, 1)
			}
			if !r.dry {
				c.rollback(a, d)
				switch {
				case full:
					c.shedOverflow(a, d, i)
				case prefix:
					c.shedPrefix(a, d, i, rd)
				default:
					c.rejectBy(a, d, i, rd)
				}
				return false, nil
			}
			kind := r.kind
			if full || prefix {
				kind = Shedding
			}
			c.dryReject(a, d, r, kind)
			// Decide the others again without it.
			copy(a.req.Hits[h:a.req.N], a.req.Hits[h+1:a.req.N])
			copy(a.hitRule[h:a.req.N], a.hitRule[h+1:a.req.N])
			a.req.N--
			continue
		}
		a.stored, a.wait = true, max(a.wait, a.res.Wait)
		rules := a.set.rules // once: each hit's rule is looked up once
		for j := range a.res.N {
			i := a.hitRule[j]
			r, hr := &rules[i], &a.res.Hits[j]
			r.ctr.add(a.shard, rAllowed, 1)
			prefix := a.onPrefix(r, j)
			if hr.Overflow && !prefix { // a prefix hit was counted when it moved there
				r.ctr.add(a.shard, rOverflowed, 1)
			}
			if hr.Lease.Held() {
				a.leases = append(a.leases, hr.Lease)
			}
			// A prefix's figures are its network's, not the client's: they
			// make no headers or early warnings.
			if r.Algorithm.rate() && !prefix {
				c.consider(d, i, hr.Decision)
				if r.early > 0 {
					c.earlyCheck(a, r, a.req.Hits[j].Key, hr.Decision)
				}
			}
		}
		if a.ask.Tightened && !a.tight && c.suspicion != nil {
			c.shadowTightened(ctx, a, d)
		}
		break
	}
	return true, nil
}

// storeHits fills a.req with the hits of p's per-key rules at cost: each
// rule's key for a, on the store limit that decides it (tightened, CGNAT,
// an override), rules whose identity a lacks left out. With peek it
// counts and logs nothing and reserves no slot.
func (c *Controller) storeHits(ctx context.Context, a *ticket, p *plan, cost int64, peek bool) {
	a.req.N, a.req.Now, a.req.Wait = 0, a.now, a.wait // reserving hits start no earlier than a Global rule's slot
	for j, i := range p.stored {
		r := &a.set.rules[i]
		var key string
		switch {
		case r.Identity == Composite:
			if a.ckeys[j].end == 0 {
				continue // the attempt lacks an identity of the key
			}
			key = a.compositeString(j)
		case !a.buildKey(r.Identity):
			continue // the attempt has no such identity
		default:
			key = a.keyString(r.Identity)
		}
		id := r.id
		switch {
		case a.tight && r.suspectID != 0:
			id = r.suspectID
		case r.Identity == IP && a.ask.CGNAT:
			if r.CGNATDefer && (a.ask.User != "" || a.ask.APIKey != "") {
				if !peek {
					c.cgnat(a, r, "skipped for a stronger identity")
				}
				continue
			}
			if r.cgnatID != 0 {
				id = r.cgnatID
				if !peek {
					c.cgnat(a, r, "limit raised")
				}
			}
		}
		a.hitRule[a.req.N] = i
		if a.set.over != nil { // a key of this rule may have an override
			if o, ok := a.set.over[i][key]; ok && a.now < o.until {
				id = o.id
			}
		}
		a.req.Add(id, key, cost)
		if r.waits != nil && a.req.N <= store.MaxHits && !peek {
			c.storeMaxWait(ctx, a, r)
		}
	}
}

// storeFailed applies the failure modes of the store rules of a request
// the store could not decide: rejected (503) when one of them fails closed
// and is not in dry-run, admitted past them otherwise. When ctx has ended
// (the client gave up, maybe causing the failure) there is nobody to admit:
// it gives back what the attempt held and returns ctx's error.
func (c *Controller) storeFailed(ctx context.Context, a *ticket, d *Decision, err error) (bool, error) {
	a.ctr[cStoreErrors].Add(1)
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
			c.dryReject(a, d, r, Shedding)
		}
		a.set.rules[i].ctr.add(a.shard, rFailOpen, 1)
	}
	d.FailedOpen = true
	a.ctr[cFailedOpen].Add(1)
	c.logFailOpen(a.now, a.set.rules[hits[0]].Name, err)
	return true, nil
}

// shedOverflow rejects a for rule i, whose store table is full of live
// keys: the server's condition, so a 503 with the short hint, no strike,
// logged once per second. What a held is given back already.
func (c *Controller) shedOverflow(a *ticket, d *Decision, i int) {
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
func (c *Controller) consider(d *Decision, i int, rd ratelimit.Decision) {
	r := &d.plan.rules[i]
	if d.rule < 0 || rd.Remaining < d.Remaining {
		d.rule, d.Limit, d.Remaining, d.Reset = i, rd.Limit, rd.Remaining, rd.ResetAfter
	}
	if !d.Warning && rd.Limit-rd.Remaining >= r.softAt {
		d.Warning, d.WarningRule = true, r.Name
	}
}

// markDry records a would-be rejection of a dry-run rule (or penalty).
func (c *Controller) markDry(a *ticket, d *Decision, name string, k Kind) {
	if !d.DryRun {
		d.DryRun, d.DryRunRule, d.DryRunKind = true, name, k
		a.ctr[cDryRun].Add(1)
	}
	c.logDryRun(a.now, name, k)
}

// rejectBy makes the rejection of rule i with its decision rd, after the
// attempt gave back what it held.
func (c *Controller) rejectBy(a *ticket, d *Decision, i int, rd ratelimit.Decision) {
	r := &a.set.rules[i]
	a.set.rules[i].ctr.add(a.shard, rRejected, 1)
	rejection(d, r, i, rd)
	if d.Kind == OverLimit && c.pen != nil {
		if a.buildKey(c.penID) {
			c.pen.Strike(a.keyString(c.penID), a.now)
			a.ctr[cStrikes].Add(1)
		}
	}
	c.done(a, d)
}

// rejection writes to d the rejection by rule r (index i) with its
// decision rd: what the response reports, and nothing else (rejectBy
// counts it and strikes; a peek does neither).
func rejection(d *Decision, r *rule, i int, rd ratelimit.Decision) {
	d.Allowed, d.Kind, d.Rule, d.RetryAfter = false, r.kind, r.Name, max(rd.RetryAfter, 1)
	if r.Algorithm == Concurrency && rd.RetryAfter != ratelimit.Never {
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
		if d.RetryAfter != ratelimit.Never {
			d.Reset = d.RetryAfter // when this client is served again (Decision.Reset)
		}
	}
}

// done counts d and hands it to the hook and the observer.
func (c *Controller) done(a *ticket, d *Decision) {
	if d.Allowed {
		c.admitted(a, d)
		return
	}
	a.ctr[[...]int{cAdmitted, cOverLimit, cShedding, cPenalized}[d.Kind]].Add(1)
	if c.answer.tells {
		c.tell(a, d)
	}
}

// admitted is done for an admission d. Small enough to inline: on a
// Controller without a hook or an observer it costs one counter and one
// test.
func (c *Controller) admitted(a *ticket, d *Decision) {
	a.ctr[cAdmitted].Add(1)
	if c.answer.tells {
		c.tell(a, d)
	}
}

// tell hands d to the hook and the observer (done).
func (c *Controller) tell(a *ticket, d *Decision) {
	if c.answer.hook != nil {
		c.answer.hook(*d)
	}
	if c.answer.obs != nil {
		c.answer.obs.ObserveDecision(d.Kind, time.Duration(max(0, c.now()-a.began)))
	}
}
