package shed

import (
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// ShedWaited reports whether a request that has waited queued in front of
// the handlers is shed for its wait, decided before the request is read:
// what connguard's WithEarlyAnswer asks of each HTTP/1.1 request it could
// answer in place of the server. When it reports true, the request is
// counted as Decide counts one that an Adaptive rule shed for its wait
// (Stats.Shedding, the rule's Rejected and ShedByWait, its Limiter's
// window, the decision hook and the Observer), and retryAfter is the
// Retry-After that Decide's rejection would carry.
//
// It decides only where nothing in the request could change the
// outcome, and reports false everywhere else: the rule set in force must
// have no categories and no tiers, no Global rate rule, and as the first
// of its Global Concurrency and Adaptive rules an Adaptive rule that is
// not in dry-run and bounds the wait (adaptive.QueueBounder); the
// Controller must have no client function (WithClient: a priority could
// exempt the request), exemptions, penalty box, suspicion, dry run,
// rejection writer or header function of its own (WithRejection,
// WithHeaders: the answer would not be theirs). Per-key rules may follow
// (a request shed by the Adaptive rule is never charged to them), but no
// rate rule: the middleware's answer would name its policy
// (RateLimit-Policy, with DraftFields).
//
// Safe for concurrent use.
func (c *Controller) ShedWaited(queued time.Duration) (retryAfter time.Duration, shed bool) {
	s := c.set.Load()
	if s.earlyAt < 0 {
		return 0, false
	}
	r := &s.rules[s.earlyAt]
	if !r.lim.ShedWaited(queued) {
		return 0, false
	}
	a := c.get()
	a.set, a.now = s, c.now()
	a.began = a.now
	d := Decision{rule: -1, plan: s.all, wall: c.wallAnchor + (a.now - c.monoAnchor)}
	retryAfter = r.shedRetryAfter()
	c.rejectBy(a, &d, s.earlyAt, ratelimit.Decision{RetryAfter: retryAfter})
	c.put(a)
	return retryAfter, true
}

// answersEarly reports whether the Controller's options (fixed at New)
// leave a request's answer to its wait alone (see ShedWaited).
func (c *Controller) answersEarly() bool {
	return c.reading.client == nil && c.reading.exempt == nil && c.pen == nil && c.suspicion == nil &&
		!c.answer.ownReject && c.answer.headers == nil
}

// earlyRule returns the index of the Adaptive rule of s by which
// ShedWaited decides, or -1 when s leaves the outcome to more than a
// request's wait (see ShedWaited).
func (s *ruleSet) earlyRule() int {
	// With tiers, all is only the list of the tiers' plans: no rule.
	if s.categorized() || len(s.all.rates) > 0 || len(s.all.concs) == 0 {
		return -1
	}
	if s.all.policyV != nil && s.all.fields&DraftFields != 0 {
		return -1 // the middleware's answer names the rate rules' policies
	}
	i := s.all.concs[0]
	if r := &s.rules[i]; r.lim == nil || r.dry {
		return -1
	}
	return i
}
