package shed

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
)

// Peek reads the state of the rules that apply to a, as Decide would
// decide it at a.Now, without deciding: nothing is charged, no permit or
// lease is taken, no slot reserved, no penalty strike given, no suspicion
// signal fed, no decision counted (Stats.Peeks counts peeks), hooked,
// observed or warned about early. It is how a handler shows a client its
// quota (a /quota endpoint; Decision.WriteHeaders writes the RateLimit
// header fields from it) and how a job runner asks whether to try.
//
// The Decision is what a response would report, for the state now: Rule,
// Limit, Remaining and Reset are those of the rate rule with the fewest
// units remaining (not less a's cost: a peek after two admissions of 1 on
// a limit of 5 reports Remaining 3). Allowed reports whether an attempt of
// a.Cost (zero: 1) would be admitted now, rule by rule in Decide's order:
//   - a penalized client is not (Kind Penalized, RetryAfter the time left
//     on its timeout), and the rules are not read;
//   - a rate rule admits it when the cost is at most its Remaining (exact
//     for the exact algorithms; the sharded Global bucket's and window's
//     Remaining are estimates, see the package doc); when it does not,
//     RetryAfter is when the quota is whole again (an upper bound of the
//     exact wait, which only a charge computes), or ratelimit.Never for
//     a cost above the limit;
//   - a Global Concurrency rule admits it when inflight + cost ≤ limit, an
//     Adaptive rule when inflight < limit (one permit an attempt), a
//     per-key Concurrency rule when the key's leases + cost ≤ limit: a
//     permit free now. A rule with MaxWait would queue what does not fit,
//     where its discipline, a fair share, or an adaptive limiter's
//     pressure may decide otherwise; a peek does not predict queues;
//   - a key that a rule's full table has no room for reads as it would be
//     decided: shed (Shedding) under OverflowReject, on the shared state
//     under OverflowShare, on its network's prefix under OverflowPrefix
//     (shed when the prefix is spent; a prefix's figures make no headers).
//
// Dry-run rules and penalties mark DryRun instead, as in Decide. The
// first rule that would reject decides, as in Decide.
//
// Peek returns Decide's errors for a's values, ctx.Err() when ctx ended
// before the store answered, and an error starting with "shed: " when the
// store failed (a peek has no failure mode to apply: it has nothing to
// report). It does not block but on the store. Safe for concurrent use.
func (c *Controller) Peek(ctx context.Context, a Attempt) (Decision, error) {
	t := c.get()
	t.ask = a
	var d Decision
	err := c.decideIn(ctx, t, nil, &d, true)
	c.put(t)
	if err != nil {
		return Decision{rule: -1}, err
	}
	return d, nil
}

// PeekRequest is Peek for the Attempt the middleware builds from r: the
// same client address (WithResolver), identities, tier, priority, weight
// and attributes (WithClient), category (WithCategory), cost (WithCost),
// Composite key parts, and suspicion: the score r would get
// (fingerprint.Tracker.Score), from what the client's requests recorded
// and r's own signals, without recording r. An exempt request
// (WithExemptions) reads as allowed by no rule. It reads nothing from r's
// body; the context is r's. Safe for concurrent use.
func (c *Controller) PeekRequest(r *http.Request) (Decision, error) {
	ip := c.reading.res.ClientIP(r)
	if c.reading.exempt != nil && c.reading.exempt.match(ip.Addr, r.URL.EscapedPath()) {
		return Decision{Allowed: true, rule: -1}, nil
	}
	a := c.get()
	c.askOf(a, r, ip, true)
	var d Decision
	err := c.decideIn(r.Context(), a, r, &d, true)
	c.put(a)
	if err != nil {
		return Decision{rule: -1}, err
	}
	return d, nil
}

// peek is decide's reading of the rules (see Peek): the same plan, keys
// and order, each rule read at cost 0 and compared with a's cost.
func (c *Controller) peek(ctx context.Context, a *ticket, d *Decision) error {
	p, err := c.begin(a, d)
	if err != nil {
		return err
	}
	a.ctr[cPeeks].Add(1)
	a.wait = 0
	checkPenalty := c.buildKeys(a, p)

	if checkPenalty {
		if left, in := c.pen.Check(a.keyString(c.penID), a.now); in {
			if !c.dryAll {
				d.Allowed, d.Kind, d.RetryAfter = false, Penalized, max(left, 1)
				return nil
			}
			peekDry(d, "", Penalized)
		}
	}
	for _, i := range p.rates {
		if !c.peekFits(a, d, i, a.set.rules[i].rate.AllowN(a.now, 0), a.cost, 0) {
			return nil
		}
	}
	for _, i := range p.concs {
		r := &a.set.rules[i]
		var st ratelimit.Decision
		cost, hint := a.cost, shedHint
		if r.lim != nil {
			cost, hint = 1, r.shedRetryAfter()
			st.Limit = int64(r.lim.Limit())
			st.Remaining = st.Limit - int64(r.lim.Inflight())
		} else {
			st.Limit = r.sem.Limit()
			st.Remaining = st.Limit - r.sem.Inflight()
		}
		if !c.peekFits(a, d, i, st, cost, hint) {
			return nil
		}
	}
	if len(p.stored) > 0 {
		c.storeHits(ctx, a, p, 0, true)
		if ok, err := c.peekStore(ctx, a, d); !ok || err != nil {
			return err
		}
	}
	if d.rule >= 0 {
		d.Rule = a.set.rules[d.rule].Name
	}
	return nil
}

// peekStore reads the store state of the hits in a.req (at cost 0) and
// folds it into d, as decideStore decides them: a key that a full table
// has no room for is shed (OverflowReject) or read on its network prefix
// (OverflowPrefix; a prefix's figures make no headers, and a spent prefix
// is shed), and read on the shared state under OverflowShare. It reports
// false when a rule rejects (d holds the rejection), or with the error of
// a store that failed.
func (c *Controller) peekStore(ctx context.Context, a *ticket, d *Decision) (bool, error) {
	for a.req.N > 0 {
		if err := c.storage.store.Decide(ctx, &a.req, &a.res); err != nil {
			a.ctr[cStoreErrors].Add(1)
			if cerr := ctx.Err(); cerr != nil {
				return false, cerr
			}
			return false, fmt.Errorf("shed: Peek: the store failed: %w", err)
		}
		moved := false
		for j := range a.res.N {
			if r := &a.set.rules[a.hitRule[j]]; a.res.Hits[j].Overflow && r.Overflow == OverflowPrefix && a.toPrefix(r, j) {
				moved = true
			}
		}
		if moved {
			continue // the same read again, those keys on their prefixes
		}
		for j := range a.res.N {
			i := a.hitRule[j]
			r := &a.set.rules[i]
			st, over := a.res.Hits[j].Decision, a.res.Hits[j].Overflow
			prefix := a.onPrefix(r, j)
			switch {
			case !prefix && !over:
				if !c.peekFits(a, d, i, st, a.cost, shedHint) {
					return false, nil
				}
				continue
			case !prefix && r.Overflow == concurrency.OverflowShare && a.cost <= st.Remaining:
				if r.Algorithm.rate() {
					c.consider(d, i, st)
				}
				continue
			case prefix && !over && a.cost <= st.Remaining:
				continue
			}
			if r.dry {
				peekDry(d, r.Name, Shedding)
				continue
			}
			retry := shedHint // a full table, as shedOverflow says; a prefix as shedPrefix does
			if prefix && !over && r.Algorithm.rate() && a.cost <= st.Limit {
				retry = max(st.ResetAfter, 1)
			}
			d.Allowed, d.Kind, d.Rule, d.RetryAfter = false, Shedding, r.Name, retry
			d.Warning, d.WarningRule = false, ""
			return false, nil
		}
		break
	}
	return true, nil
}

// peekFits reports whether an attempt of cost fits rule i, whose state st
// was read at cost 0, and folds st into d: the fewest remaining of the
// rate rules, or the rejection (see Peek for RetryAfter). It reports false
// when the rule rejects (not in dry-run): d holds the rejection then.
func (c *Controller) peekFits(a *ticket, d *Decision, i int, st ratelimit.Decision, cost int64, hint time.Duration) bool {
	r := &a.set.rules[i]
	rate := r.Algorithm.rate()
	if cost <= st.Remaining {
		if rate {
			c.consider(d, i, st)
		}
		return true
	}
	if r.dry {
		peekDry(d, r.Name, r.kind)
		if rate {
			c.consider(d, i, st)
		}
		return true
	}
	switch {
	case cost > st.Limit:
		st.RetryAfter = ratelimit.Never
	case rate:
		st.RetryAfter = max(st.ResetAfter, 1)
	default:
		st.RetryAfter = hint
	}
	rejection(d, r, i, st)
	return false
}

// peekDry is markDry for a peek: the would-be rejection reported, not
// counted or logged.
func peekDry(d *Decision, name string, k Kind) {
	if !d.DryRun {
		d.DryRun, d.DryRunRule, d.DryRunKind = true, name, k
	}
}
