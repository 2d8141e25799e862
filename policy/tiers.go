package policy

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// MaxTiers is the most tiers a policy declares.
const MaxTiers = 16

func (v *validator) tierSpec(path string, t *TiersSpec, names map[string]bool) {
	if len(t.Names) == 0 || len(t.Names) > MaxTiers {
		v.failf(path+".names", "must list 1 to %d tiers, got %d", MaxTiers, len(t.Names))
	}
	for i, n := range t.Names {
		switch {
		case n == "":
			v.failf(fmt.Sprintf("%s.names[%d]", path, i), "is empty")
		case names[n]:
			v.failf(fmt.Sprintf("%s.names[%d]", path, i), "tier %q is declared twice", n)
		}
		names[n] = true
	}
	if !names[t.Default] {
		v.failf(path+".default", "must be one of the declared tiers, got %q", t.Default)
	}
	for _, n := range slices.Sorted(maps.Keys(t.Weights)) { // in order: the first error is the same every time
		switch w := t.Weights[n]; {
		case !names[n]:
			v.failf(path+".weights", "%q is not a declared tier", n)
		case w < 1 || w > shed.MaxWeight:
			v.failf(path+".weights", "tier %q weight must be in [1, %d], got %d", n, shed.MaxWeight, w)
		}
	}
}

// tiered returns the shed rules of rule spec s (validated as r): r itself,
// or with Tiers one rule per declared tier.
func (v *validator) tiered(path string, s *RuleSpec, r shed.Rule, tiers *TiersSpec, names map[string]bool) []shed.Rule {
	if s.Tier != "" {
		if !names[s.Tier] {
			v.failf(path+".tier", "%q is not a declared tier", s.Tier)
		}
		if s.Tiers != nil {
			v.failf(path+".tiers", "a rule has either a tier or tiers")
		}
		r.Tier = s.Tier
		return []shed.Rule{r}
	}
	if s.Tiers == nil {
		return []shed.Rule{r}
	}
	if tiers == nil {
		v.failf(path+".tiers", "the policy declares no tiers")
		return nil
	}
	if r.Algorithm == shed.Adaptive {
		v.failf(path+".tiers", "an adaptive rule has one limiter, not one per tier")
		return nil
	}
	for name := range s.Tiers {
		if !names[name] {
			v.failf(path+".tiers."+name, "%q is not a declared tier", name)
		}
	}
	out := make([]shed.Rule, 0, len(tiers.Names))
	for _, name := range tiers.Names {
		tr := r
		tr.Name, tr.Tier = r.Name+"/"+name, name
		if l, ok := s.Tiers[name]; ok {
			tp := path + ".tiers." + name
			if l.Limit != 0 {
				if l.Limit < 0 {
					v.failf(tp+".limit", "must be positive, got %d", l.Limit)
				}
				tr.Limit = l.Limit
			}
			if l.Rate != nil {
				if r.Algorithm != shed.TokenBucket {
					v.failf(tp+".rate", "applies only to a token bucket")
				}
				if l.Rate.Count <= 0 {
					v.failf(tp+".rate.count", "must be positive, got %d", l.Rate.Count)
				}
				tr.Rate = ratelimit.Rate{Count: l.Rate.Count, Per: v.positive(tp+".rate.per", l.Rate.Per)}
			}
			if l.Window != "" {
				if r.Window == 0 {
					v.failf(tp+".window", "applies only to fixed_window, sliding_window and sliding_log")
				}
				tr.Window = v.positive(tp+".window", l.Window)
			}
		}
		out = append(out, tr)
	}
	return out
}

// override validates o and returns the shed overrides it makes: one per
// tier of a tiered rule.
func (v *validator) override(path string, o *OverrideSpec, p *Policy) []shed.Override {
	if o.Key == "" {
		v.failf(path+".key", "is required")
	}
	if math.IsNaN(o.Factor) || o.Factor <= 0 || o.Factor > 1e6 {
		v.failf(path+".factor", "must be in (0, 1e6], got %v", o.Factor)
	}
	until, err := time.Parse(time.RFC3339, o.Until)
	if err != nil {
		v.failf(path+".until", "must be an RFC 3339 time such as 2026-12-07T00:00:00Z, got %q", o.Until)
	}
	var out []shed.Override
	for i, r := range p.rules {
		if p.file.Rules[p.origin[i]].Name != o.Rule {
			continue
		}
		if r.Identity == shed.Global {
			v.failf(path+".rule", "%q is a global rule: it has no keys to override", o.Rule)
			return nil
		}
		if r.Identity == shed.IP && o.Key != "" && !isAddr(o.Key) {
			// shed groups the address as its resolver does; the key is not
			// echoed, as it might be a secret filed under the wrong rule.
			v.failf(path+".key", "is not an IP address (an IP rule's key is one address, without port or prefix)")
			return nil
		}
		out = append(out, shed.Override{Rule: r.Name, Key: o.Key, Factor: o.Factor, Until: until})
	}
	if len(out) == 0 {
		v.failf(path+".rule", "%q is not a rule of this policy", o.Rule)
	}
	return out
}

// isAddr reports whether s is one IP address in text form.
func isAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
