package policy

import (
	"errors"
	"reflect"
	"sync"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/shed"
)

// Live is a shed.Controller run from a policy that can be replaced while
// it runs (Apply, Reload): the new rules, overrides and categories take
// effect atomically, rules unchanged between the two policies keep their
// state and counters (shed.Controller.Reload), and a policy that does not
// load or validate is rejected with the old one left in force.
//
// A Live is safe for concurrent use; replacements are serialized.
type Live struct {
	c   *shed.Controller
	mu  sync.Mutex
	cur *Policy
	// limiters are the adaptive limiters in force by rule name, with the
	// spec they were built from: an unchanged adaptive rule keeps its
	// limiter (and so its state).
	limiters map[string]liveLimiter
}

type liveLimiter struct {
	spec AdaptiveSpec
	lim  *adaptive.Limiter
}

// NewLive returns a Live enforcing p, built as p.New(opts...) would.
func NewLive(p *Policy, opts ...shed.Option) (*Live, error) {
	l := &Live{cur: p, limiters: map[string]liveLimiter{}}
	rules, err := l.rules(p)
	if err != nil {
		return nil, err
	}
	c, err := p.controller(rules, opts)
	if err != nil {
		return nil, err
	}
	l.c = c
	l.keep(p, rules)
	return l, nil
}

// Controller returns the controller, for its Middleware, Decide and Stats.
func (l *Live) Controller() *shed.Controller { return l.c }

// Policy returns the policy in force.
func (l *Live) Policy() *Policy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// Reload loads the policy file at path and applies it (see Apply).
func (l *Live) Reload(path string) error {
	p, err := Load(path)
	if err != nil {
		return err
	}
	return l.Apply(p)
}

// Apply puts p in force. It returns an error, leaving the policy in force
// unchanged, when p's rules or overrides do not build, or when p changes
// what a running controller cannot change: the policy-wide dry_run, the
// default tier, or the penalty box (restart for those).
func (l *Live) Apply(p *Policy) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur
	switch {
	case p.file.DryRun != old.file.DryRun:
		return p.errAt("dry_run", errors.New("cannot change on a running controller"))
	case defaultTier(p) != defaultTier(old):
		return p.errAt("tiers.default", errors.New("cannot change on a running controller"))
	case !reflect.DeepEqual(p.file.Penalties, old.file.Penalties):
		return p.errAt("penalties", errors.New("cannot change on a running controller"))
	}
	rules, err := l.rules(p)
	if err != nil {
		return err
	}
	err = l.c.Reload(shed.Config{Rules: rules, Overrides: p.overrides, Category: p.CategoryFunc(), TierWeights: tierWeights(p)})
	var oe *shed.OverrideError
	switch {
	case errors.As(err, &oe):
		return p.overrideErr(err)
	case err != nil:
		return p.attribute(rules, err)
	}
	l.cur = p
	l.keep(p, rules)
	return nil
}

// tierWeights returns the tier weights of p, an empty map for none (so
// that a reload that drops them removes them).
func tierWeights(p *Policy) map[string]int {
	if p.tiers == nil || p.tiers.Weights == nil {
		return map[string]int{}
	}
	return p.tiers.Weights
}

func defaultTier(p *Policy) string {
	if p.tiers == nil {
		return ""
	}
	return p.tiers.Default
}

// rules returns p's rules with the limiters in force for unchanged
// adaptive rules and new ones for the others.
func (l *Live) rules(p *Policy) ([]shed.Rule, error) {
	out := make([]shed.Rule, len(p.rules))
	copy(out, p.rules)
	for i, spec := range p.adaptive {
		if k, ok := l.limiters[out[i].Name]; ok && k.spec == spec {
			out[i].Limiter = k.lim
			continue
		}
		lim, err := newLimiter(spec)
		if err != nil {
			return nil, p.errAt("rules["+itoa(p.origin[i])+"].adaptive", err)
		}
		out[i].Limiter = lim
	}
	return out, nil
}

// keep records the limiters of the rules now in force.
func (l *Live) keep(p *Policy, rules []shed.Rule) {
	l.limiters = map[string]liveLimiter{}
	for i, spec := range p.adaptive {
		l.limiters[rules[i].Name] = liveLimiter{spec: spec, lim: rules[i].Limiter}
	}
}
