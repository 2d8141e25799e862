package shed

import (
	"fmt"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/queueing"
)

// MaxWeight is the largest Attempt.Weight: queueing.MaxWeight.
const MaxWeight = queueing.MaxWeight

// fairBy returns the identity a Global Concurrency or Adaptive rule shares
// its limit by (Queue.FairShare), and whether it shares it at all.
func (r *rule) fairBy() (Identity, bool) {
	return r.Queue.FairShare, r.Queue.FairShare != Global
}

// fairName returns the name a's share is kept under in a rule shared by
// id: its identity key, or "" (one share for every attempt without that
// identity). buildKey ran for id before the decision took any key string.
func (a *ticket) fairName(id Identity) string {
	if a.keys[id].end == 0 {
		return ""
	}
	return a.keyString(id)
}

// weight returns a's fair-share weight: Attempt.Weight, or when that is
// 0 its tier's weight (WithTierWeights), or 1.
func (a *ticket) weight() int {
	if a.ask.Weight != 0 {
		return a.ask.Weight
	}
	if w, ok := a.set.weights[a.ask.Tier]; ok {
		return w
	}
	return 1
}

// WithTierWeights gives the attempts of the named tiers (Attempt.Tier,
// Client.Tier) their fair-share weight, for those that carry no
// Attempt.Weight of their own: in a rule with Queue.FairShare, the tenants
// of a tier weighing 4 are each guaranteed four times the share of a
// tenant weighing 1, the weight of tiers not named. A Reload with
// Config.TierWeights replaces them. It returns an error from New for a
// weight outside [1, MaxWeight].
func WithTierWeights(weights map[string]int) Option {
	return optionFunc(func(c *config) error {
		w, err := tierWeights(weights)
		if err != nil {
			return err
		}
		c.tierWeights = w
		return nil
	})
}

// tierWeights validates weights and returns a copy of them (nil for none).
func tierWeights(weights map[string]int) (map[string]int, error) {
	if len(weights) == 0 {
		return nil, nil
	}
	out := make(map[string]int, len(weights))
	for tier, w := range weights {
		if w < 1 || w > MaxWeight {
			return nil, fmt.Errorf("shed: tier %q weight must be in [1, %d], got %d", tier, MaxWeight, w)
		}
		out[tier] = w
	}
	return out, nil
}

// lane returns the way into r's queue for a: its priority's, and with
// fair share, its share's.
func (r *rule) lane(a *ticket) queueing.Lane {
	l := r.lanes[a.ask.Priority.lane()]
	if id, ok := r.fairBy(); ok {
		// The queue has fair share and the weight was validated by
		// decide: Tenant cannot fail.
		l, _ = l.Tenant(a.fairName(id), a.weight())
	}
	return l
}

// adaptiveRequest returns the adaptive.Request of a for r's Limiter.
func (r *rule) adaptiveRequest(a *ticket) adaptive.Request {
	req := adaptive.Request{Priority: int8(a.ask.Priority), Queued: a.ask.Queued} // the same scale: 0 is Critical
	if id, ok := r.fairBy(); ok {
		req.Tenant, req.Weight = a.fairName(id), a.weight()
	}
	return req
}

// buildFairKeys builds the identity keys the fair-share rules of p share
// by, with the others, before any key string is taken.
func (a *ticket) buildFairKeys(p *plan) {
	for _, i := range p.concs {
		if id, ok := a.set.rules[i].fairBy(); ok {
			a.buildKey(id)
		}
	}
}

// withoutFairShare returns q with no fair share: the discipline that only
// a Global Concurrency rule may have.
func (q Queue) withoutFairShare() Queue {
	q.FairShare = Global
	return q
}
