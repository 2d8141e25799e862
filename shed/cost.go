package shed

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/store"
)

// WithActualCost tells the middleware what a request really cost, from the
// response header fields (or trailers) its handler set, such as the tokens
// an LLM call used: f gets them after the handler returned and reports the
// cost, or false to keep the charge made up front (WithCost's estimate).
// The difference is charged, or given back, on every rate rule that
// charged the request (see Token.Recost). f runs on every admitted
// request and must be fast and safe for concurrent use.
func WithActualCost(f func(http.Header) (int64, bool)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithActualCost(nil)")
		}
		c.actual = f
		return nil
	})
}

// Recost tells the Token what its work really cost, before Done: the
// difference with what the rate rules were charged (Attempt.Cost) is given
// back (store.Refunder on a store; Memory and redisstore are) or charged
// on every rate rule that charged the attempt, in one store call. A charge
// the rules cannot take any more (the quota is spent) is not made, and is
// counted as an overspend (RuleStats.Overspent): the quota is then exceeded
// by at most what the attempts in flight underestimated, never more, since
// a spent quota admits no new attempt. Concurrency permits stay as
// acquired. It returns an error, changing nothing, for a negative cost, a
// zero Token and a Token done already. Not safe for concurrent use with
// the same Token's Done.
func (t Token) Recost(actual int64) error {
	switch {
	case actual < 0:
		return fmt.Errorf("shed: Recost with a negative cost %d", actual)
	case t.a == nil || t.a.gen.Load() != t.gen || !t.a.active:
		return errors.New("shed: Recost of a Token that holds no attempt (zero, or done)")
	}
	t.a.c.recost(t.a, t.a.c.now(), actual)
	return nil
}

// recost charges or gives back, at now, the difference between what a's
// rate rules were charged and actual (see Token.Recost).
func (c *Controller) recost(a *ticket, now, actual int64) {
	delta := actual - a.charged
	if delta == 0 {
		return
	}
	for k := range a.rated {
		ch := &a.rated[k]
		r := &a.set.rules[ch.rule]
		if delta < 0 {
			// To the window or shard that counted it, what it still weighs.
			r.rate.RefundLate(ch.from, a.now, now, -delta, ch.until)
			continue
		}
		rd, from := r.rate.AllowNShard(a.semShard, now, delta)
		switch {
		case !rd.Allowed():
			r.ctr.add(a.shard, rOverspent, 1)
		case from != ch.from:
			// A sharded bucket's charge now lies in two shards: a
			// later refund (Rule.Count) is dropped, as for a charge
			// gathered from several; the bucket then admits less,
			// never more.
			ch.from = 0
		}
	}
	// The store's rate hits, with the difference as their cost; a.req's
	// costs become actual, for a later refund by Rule.Count.
	a.adj.N, a.adj.Now, a.adjRes.Now = 0, now, a.res.Now // a refund goes to the admission's windows
	for j := range a.req.N {
		if a.set.rules[a.hitRule[j]].Algorithm == Concurrency {
			continue
		}
		h := &a.req.Hits[j]
		a.adj.Add(h.Limit, h.Key, max(delta, -delta))
		a.adjRes.Hits[a.adj.N-1] = a.res.Hits[j]
		h.Cost = actual
	}
	a.charged = actual
	if a.adj.N == 0 {
		return
	}
	var err error
	switch rf, ok := c.storage.store.(store.Refunder); {
	case delta < 0 && ok:
		a.adjRes.Allowed, a.adjRes.N = true, a.adj.N
		err = rf.Refund(context.Background(), &a.adj, &a.adjRes)
	case delta < 0:
		err = fmt.Errorf("shed: the store (%T) cannot refund", c.storage.store)
	default:
		err = c.storage.store.Decide(context.Background(), &a.adj, &a.adjRes)
		if err == nil && !a.adjRes.Allowed {
			err = errors.New("over the limit")
		}
	}
	if err != nil {
		for j := range a.req.N {
			if i := a.hitRule[j]; a.set.rules[i].Algorithm != Concurrency {
				a.set.rules[i].ctr.add(a.shard, rOverspent, 1)
			}
		}
	}
}
