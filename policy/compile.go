package policy

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/shed"
)

// Rules returns the policy's shed rules, in file order. Each adaptive
// rule gets a new adaptive.Limiter (a limiter must not be shared between
// rules or controllers). It returns an *Error for a limiter the adaptive
// package rejects.
func (p *Policy) Rules() ([]shed.Rule, error) {
	out := make([]shed.Rule, len(p.rules))
	copy(out, p.rules)
	for i, a := range p.adaptive {
		lim, err := newLimiter(a)
		if err != nil {
			return nil, p.errAt(fmt.Sprintf("rules[%d].adaptive", p.origin[i]), err)
		}
		out[i].Limiter = lim
	}
	return out, nil
}

// newLimiter builds the limiter an AdaptiveSpec describes.
func newLimiter(a AdaptiveSpec) (*adaptive.Limiter, error) {
	var opts []adaptive.Option
	if a.InitialLimit > 0 {
		opts = append(opts, adaptive.WithInitialLimit(a.InitialLimit))
	}
	if a.MaxLimit > 0 {
		opts = append(opts, adaptive.WithLimits(a.MinLimit, a.MaxLimit))
	}
	var (
		alg adaptive.Algorithm
		err error
	)
	switch a.Algorithm {
	case "default":
		switch a.SchedulingTarget {
		case "":
		case "off":
			opts = append(opts, adaptive.WithoutSchedulingSignal())
		default:
			d, err := parseDuration(a.SchedulingTarget) // validated by Parse
			if err != nil {
				return nil, err
			}
			opts = append(opts, adaptive.WithSchedulingTarget(d))
		}
		alg, err = adaptive.NewDefault(opts...)
	case "aimd":
		alg, err = adaptive.NewAIMD(opts...)
	case "vegas":
		alg, err = adaptive.NewVegas(opts...)
	default:
		alg, err = adaptive.NewGradient2(opts...)
	}
	if err != nil {
		return nil, err
	}
	if a.fair {
		return adaptive.NewLimiter(alg, adaptive.WithQueue(queueing.WithFairShare()))
	}
	return adaptive.NewLimiter(alg)
}

// Options returns the shed options the policy implies: its categorizer
// (WithCategory), dry-run for everything (WithDryRun) and a new penalty box
// (WithPenalties) when the file asks for them.
func (p *Policy) Options() ([]shed.Option, error) {
	opts := []shed.Option{shed.WithCategory(p.CategoryFunc())}
	if p.tiers != nil {
		opts = append(opts, shed.WithDefaultTier(p.tiers.Default))
		if len(p.tiers.Weights) > 0 {
			opts = append(opts, shed.WithTierWeights(p.tiers.Weights))
		}
	}
	if p.file.DryRun {
		opts = append(opts, shed.WithDryRun())
	}
	if s := p.file.Suspicion; s != nil {
		tracker, err := fingerprint.NewTracker(s.Capacity)
		if err != nil {
			return nil, p.errAt("suspicion", err)
		}
		scale, err := penalty.NewSuspicionScale(s.Threshold, s.Floor)
		if err != nil {
			return nil, p.errAt("suspicion", err)
		}
		opts = append(opts, shed.WithSuspicion(shed.Suspicion{Tracker: tracker, Scale: scale,
			Demote: s.DemoteTo != "", Priority: demotions[s.DemoteTo], DryRun: s.DryRun}))
	}
	if p.exempt != nil {
		opts = append(opts, shed.WithExemptions(*p.exempt))
	}
	if cs := p.file.Cost; cs != nil {
		opts = append(opts, costOptions(cs)...)
	}
	if p.pen != nil {
		box, err := p.pen.box()
		if err != nil {
			return nil, p.errAt("penalties", err)
		}
		opts = append(opts, shed.WithPenalties(box, p.pen.identity))
	}
	return opts, nil
}

// New returns a shed.Controller enforcing the policy, with the policy's
// options followed by opts (a store, a clock, a client func whose
// Client.Tier is the client's tier), and the policy's overrides. An error of
// shed, the store or the concurrency package is returned as an *Error
// naming the rule's line and path.
func (p *Policy) New(opts ...shed.Option) (*shed.Controller, error) {
	rules, err := p.Rules()
	if err != nil {
		return nil, err
	}
	return p.controller(rules, opts)
}

// controller returns a shed.Controller enforcing rules, with the policy's
// options followed by opts, and the policy's overrides; its errors are New's.
func (p *Policy) controller(rules []shed.Rule, opts []shed.Option) (*shed.Controller, error) {
	popts, err := p.Options()
	if err != nil {
		return nil, err
	}
	c, err := shed.New(rules, append(popts, opts...)...)
	if err != nil {
		return nil, p.attribute(rules, err)
	}
	if err := c.SetOverrides(p.overrides); err != nil {
		_ = c.Close()
		return nil, p.overrideErr(err)
	}
	return c, nil
}

// attribute finds the rule a shed error is about, by building each rule
// alone, and places the error there; an error of the rules together (too
// many per-key rules in one category) is placed on "rules".
func (p *Policy) attribute(rules []shed.Rule, err error) error {
	for i, r := range rules {
		if r.Limiter != nil {
			continue // a limiter serves one controller; its rule was built fine
		}
		r.Tier = "" // alone, a tier would need a default
		c, e := shed.New([]shed.Rule{r})
		if e != nil {
			return p.errAt(fmt.Sprintf("rules[%d]", p.origin[i]), e)
		}
		_ = c.Close()
	}
	return p.errAt("rules", err)
}

// overrideErr places an error of shed's SetOverrides or Reload: a
// *shed.OverrideError at the override of the file it comes from, told in the
// file's numbering (an override of a tiered rule is one shed override per
// tier); another on "overrides".
func (p *Policy) overrideErr(err error) *Error {
	var oe *shed.OverrideError
	if !errors.As(err, &oe) || oe.Index < 0 || oe.Index >= len(p.overrideOrigin) {
		return p.errAt("overrides", err)
	}
	msg := fmt.Sprintf("shed: rule %q: %v", oe.Rule, oe.Err)
	if oe.First >= 0 && oe.First < len(p.overrideOrigin) {
		msg = fmt.Sprintf("shed: the key of overrides[%d] is given again (rule %q sees one client in both)",
			p.overrideOrigin[oe.First], oe.Rule)
	}
	return p.errAt(fmt.Sprintf("overrides[%d]", p.overrideOrigin[oe.Index]), &placedError{msg: msg, err: err})
}

// placedError is an error of a lower package told in the file's terms; it
// unwraps to the original.
type placedError struct {
	msg string
	err error
}

func (e *placedError) Error() string { return e.msg }
func (e *placedError) Unwrap() error { return e.err }

// errAt places err at path of the policy's file.
func (p *Policy) errAt(path string, err error) *Error {
	return &Error{File: p.name, Line: p.loc.line(path), Path: path, Err: err}
}

func itoa(i int) string { return fmt.Sprint(i) }

// Tiers returns the declared tiers and the default tier; none when the
// policy declares no tiers.
func (p *Policy) Tiers() (names []string, def string) {
	if p.tiers == nil {
		return nil, ""
	}
	return append([]string(nil), p.tiers.Names...), p.tiers.Default
}

// Penalties reports whether the policy has a penalty box, and the identity
// it keys on.
func (p *Policy) Penalties() (shed.Identity, bool) {
	if p.pen == nil {
		return 0, false
	}
	return p.pen.identity, true
}

// Overrides returns the policy's overrides as shed applies them: one per
// tier of a tiered rule.
func (p *Policy) Overrides() []shed.Override {
	return append([]shed.Override(nil), p.overrides...)
}
