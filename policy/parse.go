package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// Bounds of a policy file, so that a hostile or broken file cannot make
// the parser, or the controller built from it, allocate without bound.
const (
	// MaxSize is the largest policy file, in bytes.
	MaxSize = 1 << 20
	// MaxRules is the most rules in a file.
	MaxRules = 1024
	// MaxCategories is the most categories, and MaxRoutes the most
	// routes of one category.
	MaxCategories = 256
	MaxRoutes     = 256
	// MaxCapacity is the most keys a rule or the penalty box may keep.
	MaxCapacity = concurrency.MaxTableCapacity
)

// Policy is a parsed, validated policy file. It is immutable and safe for
// concurrent use.
type Policy struct {
	name  string
	file  File
	rules []shed.Rule // Limiter nil; see adaptive
	// origin is the index in File.Rules that each rule comes from (a rule
	// with tiers gives one rule per tier).
	origin []int
	// adaptive holds the limiter spec of each adaptive rule, by index in
	// rules.
	adaptive  map[int]AdaptiveSpec
	tiers     *TiersSpec
	exempt    *shed.Exemptions
	overrides []shed.Override
	// overrideOrigin is the index in File.Overrides that each override
	// comes from (an override of a tiered rule gives one per tier).
	overrideOrigin []int
	cats           []category
	pen            *penaltyConfig
	loc            *locator
}

// Load reads and parses the policy file at path (see Parse).
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse parses and validates the policy document data; name is the file
// name its errors report. It returns an *Error naming the line and field
// of the first problem: a syntax error, an unknown field, a value of the
// wrong type or out of range, a field that does not apply to the rule's
// algorithm, a category that is not declared. The checks of shed and the
// concurrency package that need the rules built run in New.
func Parse(name string, data []byte) (*Policy, error) {
	if len(data) > MaxSize {
		return nil, &Error{File: name, Line: 1, Err: fmt.Errorf("larger than %d bytes", MaxSize)}
	}
	loc, err := locate(data, reflect.TypeFor[File]())
	if err != nil {
		var se *schemaError
		errors.As(err, &se)
		return nil, &Error{File: name, Line: se.line, Path: se.path, Err: errors.New(se.msg)}
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		path, line, msg := loc.decodeError(err)
		return nil, &Error{File: name, Line: line, Path: path, Err: errors.New(msg)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{File: name, Line: loc.lineAt(dec.InputOffset()), Err: errors.New("data after the document")}
	}
	p := &Policy{name: name, file: f, loc: loc}
	v := validator{file: name, loc: loc}
	v.policy(p)
	if v.err != nil {
		return nil, v.err
	}
	return p, nil
}

// Name returns the file name the policy was parsed under.
func (p *Policy) Name() string { return p.name }

// File returns a copy of the document the policy was parsed from.
func (p *Policy) File() File { return cloneFile(p.file) }

// validator collects the first problem of a document, with its place.
type validator struct {
	file string
	loc  *locator
	err  *Error
}

func (v *validator) failf(path, format string, args ...any) {
	if v.err == nil {
		v.err = &Error{File: v.file, Line: v.loc.line(path), Path: path, Err: fmt.Errorf(format, args...)}
	}
}

// duration parses an optional duration field; "" is zero.
func (v *validator) duration(path, s string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := parseDuration(s)
	if err != nil {
		v.failf(path, "%v", err)
		return 0
	}
	if d < 0 {
		v.failf(path, "must not be negative, got %s", s)
	}
	return d
}

// positive parses a duration field that the rule requires.
func (v *validator) positive(path, s string) time.Duration {
	if s == "" {
		v.failf(path, "is required")
		return 0
	}
	d := v.duration(path, s)
	if d == 0 && v.err == nil {
		v.failf(path, "must be positive, got %s", s)
	}
	return d
}

func (v *validator) policy(p *Policy) {
	f := &p.file
	if f.Version != 1 {
		v.failf("version", "must be 1, got %d", f.Version)
	}
	if len(f.Categories) > MaxCategories {
		v.failf("categories", "at most %d categories, got %d", MaxCategories, len(f.Categories))
	}
	if len(f.Rules) == 0 {
		v.failf("rules", "at least one rule is required")
	}
	if len(f.Rules) > MaxRules {
		v.failf("rules", "at most %d rules, got %d", MaxRules, len(f.Rules))
	}
	if v.err != nil {
		return
	}
	p.cats = v.categories(f.Categories)
	names := map[string]bool{"read": true, "write": true}
	for _, c := range f.Categories {
		names[c.Name] = true
	}
	if f.Cost != nil {
		v.costSpec("cost", f.Cost)
	}
	if f.Exempt != nil {
		p.exempt = v.exemptSpec("exempt", f.Exempt)
	}
	if s := f.Suspicion; s != nil {
		if s.Capacity <= 0 || s.Capacity > MaxCapacity {
			v.failf("suspicion.capacity", "must be in [1, %d], got %d", MaxCapacity, s.Capacity)
		}
		if _, ok := demotions[s.DemoteTo]; !ok {
			v.failf("suspicion.demote_to", "must be sheddable, sheddable_plus or critical, got %q", s.DemoteTo)
		}
		if _, err := penalty.NewSuspicionScale(s.Threshold, s.Floor); err != nil {
			v.failf("suspicion", "%v", err)
		}
	}
	tierNames := map[string]bool{}
	if f.Tiers != nil {
		p.tiers = f.Tiers
		v.tierSpec("tiers", f.Tiers, tierNames)
	}
	ruleNames := make(map[string]bool, len(f.Rules))
	for i := range f.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		if ruleNames[f.Rules[i].Name] {
			v.failf(path+".name", "rule name %q is used twice", f.Rules[i].Name)
		}
		ruleNames[f.Rules[i].Name] = true
		r := v.rule(path, &f.Rules[i], names)
		for _, tr := range v.tiered(path, &f.Rules[i], r, f.Tiers, tierNames) {
			if f.Rules[i].Adaptive != nil {
				if p.adaptive == nil {
					p.adaptive = make(map[int]AdaptiveSpec)
				}
				a := *f.Rules[i].Adaptive
				a.fair = tr.Queue.FairShare != shed.Global
				p.adaptive[len(p.rules)] = a
			}
			p.rules = append(p.rules, tr)
			p.origin = append(p.origin, i)
		}
		if v.err != nil {
			return
		}
	}
	seen := map[string]bool{}
	for _, r := range p.rules {
		if seen[r.Name] {
			v.failf("rules", "two rules are named %q (a tiered rule is one rule per tier, named \"name/tier\")", r.Name)
			return
		}
		seen[r.Name] = true
	}
	for i := range f.Overrides {
		for _, o := range v.override(fmt.Sprintf("overrides[%d]", i), &f.Overrides[i], p) {
			p.overrides = append(p.overrides, o)
			p.overrideOrigin = append(p.overrideOrigin, i)
		}
	}
	if f.Penalties != nil {
		p.pen = v.penalties("penalties", f.Penalties)
	}
}

// Enumerations of the format, by name.
var (
	identities = map[string]shed.Identity{"global": shed.Global, "ip": shed.IP, "user": shed.User,
		"api_key": shed.APIKey, "tenant": shed.Tenant, "composite": shed.Composite}
	algorithms = map[string]shed.Algorithm{"token_bucket": shed.TokenBucket, "fixed_window": shed.FixedWindow,
		"sliding_window": shed.SlidingWindow, "sliding_log": shed.SlidingLog, "concurrency": shed.Concurrency,
		"adaptive": shed.Adaptive}
	demotions = map[string]shed.Priority{"": shed.Critical, "sheddable": shed.Sheddable,
		"sheddable_plus": shed.SheddablePlus, "critical": shed.Critical}
	failures = map[string]shed.FailureMode{"": shed.FailOpen, "fail_open": shed.FailOpen, "fail_closed": shed.FailClosed}
)

func (v *validator) rule(path string, s *RuleSpec, cats map[string]bool) shed.Rule {
	r := shed.Rule{Name: s.Name, Category: s.Category, Capacity: s.Capacity, MaxBytes: s.MaxBytes, QueueLength: s.QueueLength,
		SoftLimit: s.SoftLimit, DryRun: s.DryRun, CGNATFactor: s.CGNATFactor, CGNATDefer: s.CGNATDefer}
	var ok bool
	if s.Name == "" {
		v.failf(path+".name", "is required")
	}
	if s.Category != "" && !cats[s.Category] {
		v.failf(path+".category", "%q is neither a declared category nor a method class", s.Category)
	}
	switch {
	case len(s.Key) > 0 && s.Identity != "" && s.Identity != "composite":
		v.failf(path+".key", "a key makes the rule composite; leave identity out (or composite), not %q", s.Identity)
	case len(s.Key) > shed.MaxKeyParts:
		v.failf(path+".key", "at most %d parts, got %d", shed.MaxKeyParts, len(s.Key))
	case len(s.Key) > 0:
		r.Identity = shed.Composite
		copy(r.Key[:], s.Key)
		for j, p := range s.Key {
			if p == "" {
				v.failf(fmt.Sprintf("%s.key[%d]", path, j), "is empty")
			}
		}
	case s.Identity == "composite":
		v.failf(path+".key", "is required for a composite rule")
	default:
		if r.Identity, ok = identities[s.Identity]; !ok {
			v.failf(path+".identity", "must be global, ip, user, api_key, tenant or composite (with a key), got %q", s.Identity)
		}
	}
	if r.Algorithm, ok = algorithms[s.Algorithm]; !ok {
		v.failf(path+".algorithm", "must be token_bucket, fixed_window, sliding_window, sliding_log, concurrency or adaptive, got %q", s.Algorithm)
	}
	if r.Failure, ok = failures[s.Failure]; !ok {
		v.failf(path+".failure", "must be fail_open or fail_closed, got %q", s.Failure)
	}
	if v.err != nil {
		return r
	}
	adaptive := r.Algorithm == shed.Adaptive
	switch {
	case adaptive && s.Limit != 0:
		v.failf(path+".limit", "an adaptive rule takes its limit from its limiter; leave it out")
	case !adaptive && s.Limit <= 0:
		v.failf(path+".limit", "must be positive, got %d", s.Limit)
	}
	r.Limit = s.Limit
	switch {
	case adaptive && s.Adaptive == nil:
		v.failf(path+".adaptive", "is required for an adaptive rule")
	case !adaptive && s.Adaptive != nil:
		v.failf(path+".adaptive", "applies only to an adaptive rule")
	case adaptive:
		v.adaptiveSpec(path+".adaptive", s.Adaptive)
	}
	switch {
	case r.Algorithm == shed.TokenBucket && s.Rate == nil:
		v.failf(path+".rate", "is required for a token bucket")
	case r.Algorithm != shed.TokenBucket && s.Rate != nil:
		v.failf(path+".rate", "applies only to a token bucket")
	case s.Rate != nil:
		if s.Rate.Count <= 0 {
			v.failf(path+".rate.count", "must be positive, got %d", s.Rate.Count)
		}
		r.Rate = ratelimit.Rate{Count: s.Rate.Count, Per: v.positive(path+".rate.per", s.Rate.Per)}
	}
	window := r.Algorithm == shed.FixedWindow || r.Algorithm == shed.SlidingWindow || r.Algorithm == shed.SlidingLog
	r.Calendar = v.calendar(path+".calendar", s.Calendar)
	switch {
	case s.Calendar != nil && r.Algorithm != shed.FixedWindow && r.Algorithm != shed.SlidingWindow:
		v.failf(path+".calendar", "applies only to fixed_window and sliding_window")
	case window && r.Calendar.Months > 0 && s.Window != "":
		v.failf(path+".window", "a window of %d calendar months takes no window", r.Calendar.Months)
	case window && r.Calendar.Months > 0:
	case window:
		if r.Window = v.positive(path+".window", s.Window); r.Window > 0 && r.Window < ratelimit.MinWindow {
			v.failf(path+".window", "must be at least %v, got %v", ratelimit.MinWindow, r.Window)
		}
	case s.Window != "":
		v.failf(path+".window", "applies only to fixed_window, sliding_window and sliding_log")
	}
	if q := s.Queue; q != nil {
		orders := map[string]queueing.Order{"": queueing.FIFO, "fifo": queueing.FIFO, "lifo": queueing.LIFO,
			"adaptive_lifo": queueing.AdaptiveLIFO}
		o, ok := orders[q.Order]
		if !ok {
			v.failf(path+".queue.order", "must be fifo, lifo or adaptive_lifo, got %q", q.Order)
		}
		if q.Reserve < 0 || q.Reserve >= 1 {
			v.failf(path+".queue.reserve", "must be in [0, 1), got %v", q.Reserve)
		}
		var fair shed.Identity
		if q.FairShare != "" {
			if fair, ok = identities[q.FairShare]; !ok || fair == shed.Global {
				v.failf(path+".queue.fair_share", "must be ip, user, api_key or tenant, got %q", q.FairShare)
			}
		}
		onlyFair := *q == QueueSpec{FairShare: q.FairShare}
		switch {
		case s.MaxWait == "" || r.Identity != shed.Global:
			v.failf(path+".queue", "applies only to a global concurrency or adaptive rule with a max_wait")
		case r.Algorithm == shed.Adaptive && !onlyFair:
			v.failf(path+".queue", "on an adaptive rule only fair_share applies (the rest is its limiter's)")
		case r.Algorithm != shed.Concurrency && r.Algorithm != shed.Adaptive:
			v.failf(path+".queue", "applies only to a global concurrency or adaptive rule with a max_wait")
		}
		r.Queue = shed.Queue{Order: o, CoDel: q.CoDel, DeadlineAware: q.DeadlineAware, Reserve: q.Reserve, FairShare: fair}
	}
	switch s.Overflow {
	case "", "reject":
	case "share":
		r.Overflow = concurrency.OverflowShare
	case "prefix":
		r.Overflow = shed.OverflowPrefix
		if r.Identity != shed.IP {
			v.failf(path+".overflow", "prefix applies only to ip rules")
		}
	default:
		v.failf(path+".overflow", "must be reject, share or prefix, got %q", s.Overflow)
	}
	if p := s.Prefix; p != nil {
		switch {
		case r.Overflow != shed.OverflowPrefix:
			v.failf(path+".prefix", "applies only to \"overflow\": \"prefix\"")
		case p.IPv4 < 0 || p.IPv4 > 32:
			v.failf(path+".prefix.ipv4", "must be 1 to 32 bits (or absent for %d), got %d", shed.DefaultPrefixIPv4, p.IPv4)
		case p.IPv6 < 0 || p.IPv6 > 128:
			v.failf(path+".prefix.ipv6", "must be 1 to 128 bits (or absent for %d), got %d", shed.DefaultPrefixIPv6, p.IPv6)
		case p.Factor < 0:
			v.failf(path+".prefix.factor", "must be positive (or absent for %d), got %v", shed.DefaultPrefixFactor, p.Factor)
		}
		r.Prefix = shed.Prefix{IPv4: p.IPv4, IPv6: p.IPv6, Factor: p.Factor}
	}
	counts := map[string]shed.Count{"": shed.CountAll, "all": shed.CountAll, "failures": shed.CountFailures,
		"client_errors": shed.CountClientErrors, "auth_failures": shed.CountAuthFailures}
	if r.Count, ok = counts[s.Count]; !ok {
		v.failf(path+".count", "must be all, failures, client_errors or auth_failures, got %q", s.Count)
	}
	if r.Count != shed.CountAll && !window && r.Algorithm != shed.TokenBucket {
		v.failf(path+".count", "applies only to rate rules")
	}
	if (s.CGNATFactor != 0 || s.CGNATDefer) && r.Identity != shed.IP {
		v.failf(path+".cgnat_factor", "applies only to ip rules")
	}
	if s.CGNATFactor != 0 && (math.IsNaN(s.CGNATFactor) || math.IsInf(s.CGNATFactor, 0) || s.CGNATFactor < 1) {
		v.failf(path+".cgnat_factor", "must be at least 1 (1 turns it off), got %v", s.CGNATFactor)
	}
	if s.Overflow != "" && r.Identity == shed.Global {
		v.failf(path+".overflow", "applies only to per-key rules (a global rule keeps no table of keys)")
	}
	r.LeaseTTL = v.duration(path+".lease_ttl", s.LeaseTTL)
	r.MaxWait = v.duration(path+".max_wait", s.MaxWait)
	queued := r.Identity == shed.Global && (r.Algorithm == shed.Concurrency || r.Algorithm == shed.Adaptive)
	reserves := r.Algorithm == shed.TokenBucket || r.Algorithm == shed.FixedWindow && r.Calendar.Months == 0
	switch {
	case s.MaxWait != "" && !queued && !reserves:
		v.failf(path+".max_wait", "applies only to token_bucket rules, fixed_window rules of a fixed length and global concurrency and adaptive rules")
	case r.MaxWait > ratelimit.MaxReserveWait:
		v.failf(path+".max_wait", "must be at most %v, got %v", ratelimit.MaxReserveWait, r.MaxWait)
	case s.QueueLength != 0 && (s.MaxWait == "" || r.Algorithm != shed.Concurrency && !reserves):
		v.failf(path+".queue_length", "applies only to a rate or global concurrency rule with a max_wait")
	}
	if s.Capacity < 0 || s.Capacity > MaxCapacity {
		v.failf(path+".capacity", "must be in [0, %d], got %d", MaxCapacity, s.Capacity)
	}
	switch {
	case s.MaxBytes < 0:
		v.failf(path+".max_bytes", "must not be negative, got %d", s.MaxBytes)
	case s.MaxBytes != 0 && r.Identity == shed.Global:
		v.failf(path+".max_bytes", "applies only to per-key rules (a global rule keeps no table of keys)")
	}
	if s.QueueLength < 0 {
		v.failf(path+".queue_length", "must not be negative, got %d", s.QueueLength)
	}
	if s.SoftLimit < 0 || s.SoftLimit > 1 {
		v.failf(path+".soft_limit", "must be in (0, 1] (or absent for the default), got %v", s.SoftLimit)
	}
	return r
}

func (v *validator) adaptiveSpec(path string, a *AdaptiveSpec) {
	switch a.Algorithm {
	case "default", "aimd", "vegas", "gradient2":
	default:
		v.failf(path+".algorithm", "must be default, aimd, vegas or gradient2, got %q", a.Algorithm)
	}
	switch t := a.SchedulingTarget; {
	case t == "":
	case a.Algorithm != "default":
		v.failf(path+".scheduling_target", "applies only to the default algorithm, not %q", a.Algorithm)
	case t != "off" && v.duration(path+".scheduling_target", t) == 0:
		v.failf(path+".scheduling_target", "must be a positive duration or \"off\", got %q", t)
	}
	if a.InitialLimit < 0 || a.MinLimit < 0 || a.MaxLimit < 0 {
		v.failf(path, "limits must not be negative")
	}
	if (a.MinLimit == 0) != (a.MaxLimit == 0) {
		v.failf(path, "min_limit and max_limit go together")
	}
	if a.MaxLimit > MaxCapacity {
		v.failf(path+".max_limit", "must be at most %d, got %d", MaxCapacity, a.MaxLimit)
	}
}
