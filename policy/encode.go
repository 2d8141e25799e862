package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/shed"
)

// FromRules writes rules as a policy document (version 1, no categories
// declared: rule categories are method classes or names the caller
// declares in File.Categories before marshalling). The rules' tiers are
// declared in order of appearance, the first as the default tier (set
// File.Tiers.Default to the Controller's). Parsing the marshalled
// document gives back rules equal to these. It returns an error for an
// Adaptive rule, whose Limiter is code rather than data (describe it with
// RuleSpec.Adaptive instead), and for values outside shed's enumerations.
func FromRules(rules []shed.Rule) (File, error) {
	f := File{Version: 1, Rules: make([]RuleSpec, len(rules))}
	for i, r := range rules {
		if r.Algorithm == shed.Adaptive || r.Limiter != nil {
			return File{}, fmt.Errorf("policy: rule %q: an adaptive limiter cannot be written; use RuleSpec.Adaptive", r.Name)
		}
		if r.Identity > shed.Composite || r.Algorithm < shed.TokenBucket || r.Algorithm > shed.Adaptive || r.Failure > shed.FailClosed ||
			r.Queue.Order > queueing.AdaptiveLIFO || r.Queue.FairShare > shed.Tenant {
			return File{}, fmt.Errorf("policy: rule %q: identity, algorithm or failure mode out of range", r.Name)
		}
		s := RuleSpec{Name: r.Name, Category: r.Category, Identity: r.Identity.String(),
			Algorithm: r.Algorithm.String(), Limit: r.Limit, Capacity: r.Capacity, MaxBytes: r.MaxBytes,
			QueueLength: r.QueueLength, SoftLimit: r.SoftLimit, DryRun: r.DryRun, Tier: r.Tier,
			CGNATFactor: r.CGNATFactor, CGNATDefer: r.CGNATDefer}
		for _, p := range r.Key {
			if p != "" {
				s.Key = append(s.Key, p)
			}
		}
		if r.Count != shed.CountAll {
			s.Count = r.Count.String()
		}
		if r.Failure != shed.FailOpen {
			s.Failure = r.Failure.String()
		}
		if r.Rate != (shed.Rule{}).Rate {
			s.Rate = &RateSpec{Count: r.Rate.Count, Per: formatDuration(r.Rate.Per)}
		}
		s.Window = optDuration(r.Window)
		s.Calendar = calendarSpec(r.Calendar)
		if q := r.Queue; q != (shed.Queue{}) {
			s.Queue = &QueueSpec{Order: [...]string{"", "lifo", "adaptive_lifo"}[q.Order], CoDel: q.CoDel,
				DeadlineAware: q.DeadlineAware, Reserve: q.Reserve}
			if q.FairShare != shed.Global {
				s.Queue.FairShare = q.FairShare.String()
			}
		}
		switch r.Overflow {
		case concurrency.OverflowShare:
			s.Overflow = "share"
		case shed.OverflowPrefix:
			s.Overflow = "prefix"
		}
		if p := r.Prefix; p != (shed.Prefix{}) {
			s.Prefix = &PrefixSpec{IPv4: p.IPv4, IPv6: p.IPv6, Factor: p.Factor}
		}
		s.LeaseTTL = optDuration(r.LeaseTTL)
		s.MaxWait = optDuration(r.MaxWait)
		f.Rules[i] = s
		if r.Tier != "" {
			if f.Tiers == nil {
				f.Tiers = &TiersSpec{Default: r.Tier}
			}
			if !slices.Contains(f.Tiers.Names, r.Tier) {
				f.Tiers.Names = append(f.Tiers.Names, r.Tier)
			}
		}
	}
	return f, nil
}

// optDuration writes an optional duration: "" for zero.
func optDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return formatDuration(d)
}

// Marshal returns f as an indented JSON document that Parse reads.
func Marshal(f File) ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return append(b, '\n'), nil
}

// cloneFile returns a deep copy of f.
func cloneFile(f File) File {
	f.Categories = slices.Clone(f.Categories)
	for i := range f.Categories {
		f.Categories[i].Routes = slices.Clone(f.Categories[i].Routes)
		f.Categories[i].Methods = slices.Clone(f.Categories[i].Methods)
	}
	f.Rules = slices.Clone(f.Rules)
	for i := range f.Rules {
		r := &f.Rules[i]
		if r.Rate != nil {
			rate := *r.Rate
			r.Rate = &rate
		}
		if r.Adaptive != nil {
			a := *r.Adaptive
			r.Adaptive = &a
		}
	}
	for i := range f.Rules {
		if t := f.Rules[i].Tiers; t != nil {
			f.Rules[i].Tiers = make(map[string]TierLimits, len(t))
			for k, l := range t {
				if l.Rate != nil {
					rate := *l.Rate
					l.Rate = &rate
				}
				f.Rules[i].Tiers[k] = l
			}
		}
	}
	if f.Tiers != nil {
		t := *f.Tiers
		t.Names = slices.Clone(t.Names)
		t.Weights = maps.Clone(t.Weights)
		f.Tiers = &t
	}
	f.Overrides = slices.Clone(f.Overrides)
	if f.Penalties != nil {
		p := *f.Penalties
		p.Timeouts = slices.Clone(p.Timeouts)
		f.Penalties = &p
	}
	return f
}
