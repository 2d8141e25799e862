package shed

import (
	"context"
	"fmt"
	"math"
	"net/http"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/sfv"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// ruleSet is a compiled set of rules: what one decision reads. It is
// immutable once published; Reload and SetOverrides publish a new one.
type ruleSet struct {
	rules []rule
	plans map[string]*plan // by category; each holds its tier plans
	all   *plan            // for categories no rule names
	// tiers are the distinct tiers of the rules, and def the index of the
	// default tier among them; none when no rule has a tier.
	tiers []string
	def   int
	// over holds, by rule index, the overrides of per-key rules by store
	// key; nil when there are none. overrides is the list they came from.
	over      []map[string]override
	overrides []Override
	// cat is the middleware's categorizer, swapped with the rules so that
	// a request never meets the categories of one set and the rules of
	// another.
	cat func(*http.Request) string
	// weights are the fair-share weights of tiers (WithTierWeights),
	// swapped with the rules like cat; nil when there are none.
	weights map[string]int
	// resized are the Global Concurrency rules whose semaphore this set
	// took over from the set before with another limit: Reload sets the
	// new limits once the set is in force (see resize).
	resized []int
	// updates are the per-key rules whose store limit this set took over
	// with other parameters: Reload updates them in the store before the
	// set is in force (see applyUpdates).
	updates []int
	// counting reports that some rule counts only some outcomes
	// (Rule.Count): finishing an attempt may give charges back.
	counting bool
	// stores reports that some rule is per-key: decisions on the set may
	// call the store, naming its limits (see storeLimits). Without one
	// (overrides are of per-key rules only) no decision names a store
	// limit, and none is counted in an epoch.
	stores bool
	// queued reports that some Adaptive rule's Limiter bounds how long a
	// request may have waited (adaptive.QueueBounder): the middleware
	// reads each request's arrival (Attempt.Queued) only then.
	queued bool
	// earlyAt is the index of the Adaptive rule by which ShedWaited
	// decides, -1 when the set leaves a request's outcome to more than its
	// wait or the Controller's options would (see earlyRule and
	// Controller.answersEarly).
	earlyAt int
	// keyed holds, by rule index, the parts of Composite rules (nil for
	// the others; nil when there is none), and req what the middleware
	// reads from a request for them.
	keyed [][]keyPart
	req   requestParts
}

// resize puts the limits of the rules that took over a semaphore in force.
// The semaphore is the one the permits held under the old set go back to,
// so a lowered limit admits nothing new until fewer run than it allows.
func (s *ruleSet) resize() {
	for _, i := range s.resized {
		// Validated at compile: the limit is positive.
		_ = s.rules[i].sem.SetLimit(s.rules[i].Limit)
	}
	s.resized = nil
}

// planFor returns the plan of category cat for an attempt of tier tier:
// a tier no rule names is decided as the default tier.
func (s *ruleSet) planFor(cat, tier string) *plan {
	p := s.all
	if cat != "" && len(s.plans) > 0 {
		if cp, ok := s.plans[cat]; ok {
			p = cp
		}
	}
	if len(s.tiers) == 0 {
		return p
	}
	t := s.def
	for i, name := range s.tiers {
		if name == tier {
			t = i
			break
		}
	}
	return p.byTier[t]
}

// categorized reports whether some rule names a category.
func (s *ruleSet) categorized() bool { return len(s.plans) > 0 }

// compile validates rules and builds a rule set. A rule equal to one of
// prev (same name, same fields) is taken over whole: its state (counters,
// store limit, semaphore, queue, local rate state) and its counters carry
// on. A Global Concurrency rule that differs only in its limit takes over
// the semaphore and queue too (the new limit is set by ruleSet.resize).
// New rules, and other changed ones, get new state.
func (c *Controller) compile(rules []Rule, prev *ruleSet, dryAll bool) (*ruleSet, error) {
	if len(rules) == 0 {
		return nil, fmt.Errorf("shed: no rules")
	}
	old := map[string]*rule{}
	if prev != nil {
		for i := range prev.rules {
			old[prev.rules[i].Name] = &prev.rules[i]
		}
	}
	s := &ruleSet{rules: make([]rule, len(rules))}
	names := make(map[string]bool, len(rules))
	built := 0 // new rules built, to undo on an error
	fail := func(err error) (*ruleSet, error) {
		for i := range built {
			if q := s.rules[i].queue; q != nil && (prev == nil || old[s.rules[i].Name] == nil || old[s.rules[i].Name].queue != q) {
				_ = q.Close()
			}
		}
		return nil, err
	}
	for i := range rules {
		if o := old[rules[i].Name]; o != nil && o.Rule == rules[i] && o.dry == (rules[i].DryRun || dryAll) {
			if names[rules[i].Name] {
				return fail(fmt.Errorf("shed: rule name %q is used twice", rules[i].Name))
			}
			names[rules[i].Name] = true
			s.rules[i] = *o
			built++
			continue
		}
		if o := old[rules[i].Name]; o != nil && resizable(o, rules[i], dryAll) && !names[rules[i].Name] {
			if err := rules[i].validate(); err != nil {
				return fail(err)
			}
			if _, err := concurrency.NewSemaphore(rules[i].Limit); err != nil {
				return fail(rules[i].errorf("%w", err))
			}
			names[rules[i].Name] = true
			s.rules[i] = *o
			s.rules[i].Rule = rules[i]
			s.resized = append(s.resized, i)
			built++
			continue
		}
		var keep *rule // a per-key rule whose store limit may change in place
		if o := old[rules[i].Name]; o != nil && c.updatable(o, rules[i], dryAll) {
			keep = o
		}
		if err := c.build(&s.rules[i], rules[i], dryAll, names, prev != nil, keep); err != nil {
			return fail(err)
		}
		if keep != nil {
			s.updates = append(s.updates, i)
		}
		if o := old[rules[i].Name]; o != nil && o.rate != nil && s.rules[i].rate != nil && o.dry == s.rules[i].dry &&
			s.rules[i].rate.adopt(o.rate, c.now()) {
			s.rules[i].ctr = o.ctr // a Global rate rule counting on, under new parameters
		}
		built++
	}
	for i := range s.rules {
		for j := range i {
			if l := s.rules[i].lim; l != nil && l == s.rules[j].lim {
				return fail(fmt.Errorf("shed: rules %q and %q share one adaptive Limiter; each Adaptive rule needs its own",
					s.rules[j].Name, s.rules[i].Name))
			}
		}
	}
	for _, r := range s.rules {
		s.counting = s.counting || r.Count != CountAll
		s.stores = s.stores || !r.local()
		s.queued = s.queued || (r.lim != nil && r.lim.QueueBound() > 0)
		if r.Tier != "" && !containsString(s.tiers, r.Tier) {
			s.tiers = append(s.tiers, r.Tier)
		}
	}
	switch {
	case len(s.tiers) > 0 && c.reading.defTier == "":
		return fail(fmt.Errorf("shed: rules have tiers (%q...); WithDefaultTier must name the tier of clients whose tier no rule names", s.tiers[0]))
	case len(s.tiers) > 0 && !containsString(s.tiers, c.reading.defTier):
		return fail(fmt.Errorf("shed: the default tier %q is no rule's tier (tiers: %q)", c.reading.defTier, s.tiers))
	case len(s.tiers) == 0 && c.reading.defTier != "" && prev == nil:
		return fail(fmt.Errorf("shed: WithDefaultTier(%q) but no rule has a tier", c.reading.defTier))
	}
	for i, t := range s.tiers {
		if t == c.reading.defTier {
			s.def = i
		}
	}
	if err := s.collectParts(); err != nil {
		return fail(err)
	}
	if err := s.makePlans(c.answer.fields); err != nil {
		return fail(err)
	}
	s.earlyAt = -1
	if c.answersEarly() {
		s.earlyAt = s.earlyRule()
	}
	return s, nil
}

// resizable reports whether r, a changed version of the rule o in force,
// is the same Global Concurrency rule with another limit: it then keeps
// o's semaphore, so the permits held under o count against r.
func resizable(o *rule, r Rule, dryAll bool) bool {
	if !o.sem.ok() || o.dry != (r.DryRun || dryAll) {
		return false
	}
	was := o.Rule
	was.Limit, r.Limit = 0, 0
	return was == r
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// build validates r and makes what enforces it. A per-key rule is
// registered with the store under its name; on a reload (renamed), under
// its name and a sequence number, since the store already holds a limit of
// that name with other parameters.
//
// With keep, a rule in force that r changes only in parameters the store
// can change in place (see updatable), r takes over keep's store limit and
// counters instead: the store limit is updated by applyUpdates once the
// whole set compiled.
func (c *Controller) build(dst *rule, r Rule, dryAll bool, names map[string]bool, reload bool, keep *rule) error {
	if err := r.validate(); err != nil {
		return err
	}
	if names[r.Name] {
		return fmt.Errorf("shed: rule name %q is used twice", r.Name)
	}
	names[r.Name] = true
	*dst = rule{Rule: r, kind: OverLimit, dry: r.DryRun || dryAll}
	if r.local() {
		dst.kind = Shedding
	}
	var err error
	switch {
	case r.Algorithm == Adaptive:
		dst.lim = r.Limiter
	case r.local() && r.Algorithm == Concurrency:
		if dst.sem, err = newPermits(r); err != nil {
			return r.errorf("%w", err)
		}
		if r.MaxWait > 0 {
			qopts := append([]queueing.Option{queueing.WithMaxWait(r.MaxWait)}, r.Queue.options()...)
			if r.QueueLength > 0 {
				qopts = append(qopts, queueing.WithMaxLength(r.QueueLength))
			}
			if dst.queue, err = queueing.New(dst.sem.one, qopts...); err != nil {
				return r.errorf("%w", err)
			}
			for p := range dst.lanes {
				if dst.lanes[p], err = dst.queue.Lane(Sheddable.queueing()+queueing.Priority(p), ""); err != nil {
					return r.errorf("%w", err)
				}
			}
		}
	case r.local():
		// The store validates the parameters (zero fields that do not
		// apply included); the concurrency package builds the state.
		if err := r.spec().Validate(); err != nil {
			return r.errorf("%w", err)
		}
		dst.rate, err = newLocalRate(r)
		if err != nil {
			return r.errorf("%w", err)
		}
		if r.reserves() {
			dst.waits = &waiters{max: r.maxWaiters()}
		}
		dst.canReserve = r.Algorithm.rate() && store.CheckReserve(r.spec()) == nil && reserves(dst.rate)
	default:
		spec := r.spec()
		if err := spec.Validate(); err != nil {
			return r.errorf("%w", err)
		}
		if r.reserves() {
			dst.waits = &waiters{max: r.maxWaiters()}
		}
		if err := c.checkBudget(&r); err != nil {
			return err
		}
		switch {
		case keep != nil:
			dst.id, dst.storeName = keep.id, keep.storeName
		default:
			if reload {
				c.storage.storeN++
				spec.Name = fmt.Sprintf("%s#%d", r.Name, c.storage.storeN)
			}
			if dst.id, err = c.register(spec); err != nil {
				return r.errorf("%w", err)
			}
			dst.storeName = spec.Name
		}
	}
	if s := c.suspicion; s != nil && s.floor < 1 && !r.local() {
		if dst.suspectID, err = c.scaled(dst, s.floor, "suspect", SuspectCapacity); err != nil {
			return r.errorf("tightened by %v: %w", s.floor, err)
		}
	}
	if f := r.cgnatFactor(); f != 1 && !r.local() {
		if dst.cgnatID, err = c.scaled(dst, f, "cgnat", CGNATCapacity); err != nil {
			return r.errorf("CGNAT factor %v: %w", f, err)
		}
	}
	if r.Overflow == OverflowPrefix {
		if dst.prefixID, err = c.registerPrefix(dst); err != nil {
			return r.errorf("prefix factor %v: %w", dst.prefixFactor(), err)
		}
	}
	if r.Algorithm.rate() {
		p := r.policy()
		if err := p.validate(); err != nil {
			return err
		}
		dst.softAt = int64(math.Ceil(r.softLimit() * float64(r.Limit)))
		dst.limitV = []string{fmt.Sprint(r.Limit)}
		dst.itemPrefix = append(sfv.AppendString(nil, r.Name), ";r="...)
		dst.problem = problemBody(OverLimit, r.Name)
	}
	if (r.Algorithm == FixedWindow || r.Algorithm == SlidingWindow) && r.Calendar.Months == 0 {
		dst.early = int64(r.Window) // months differ in length: no early warnings
	}
	if keep != nil {
		dst.ctr = keep.ctr // the same limit, under new parameters
		return nil
	}
	ctr := newCounters(nPerRule)
	dst.ctr = &ctr
	return nil
}

// updatable reports whether r, a changed version of the per-key rule o in
// force, differs from it only in what a store.Updater changes in place
// (Limit, Rate, LeaseTTL) or what is not the rule's own store limit (a
// prefix overflow: OverflowPrefix is OverflowReject to the store, and the
// prefix limit is registered anew), and the store is one.
func (c *Controller) updatable(o *rule, r Rule, dryAll bool) bool {
	if _, ok := c.storage.store.(store.Updater); !ok || o.id == 0 || o.dry != (r.DryRun || dryAll) {
		return false
	}
	was := o.Rule
	was.Limit, was.Rate, was.LeaseTTL = 0, ratelimit.Rate{}, 0
	r.Limit, r.Rate, r.LeaseTTL = 0, ratelimit.Rate{}, 0
	was.Overflow, r.Overflow = was.storeOverflow(), r.storeOverflow()
	was.Prefix, r.Prefix = Prefix{}, Prefix{}
	return was == r
}

// applyUpdates changes in place the store limits of the rules of s that
// took over a limit in force (compile's updates), before s is published. A
// limit the store cannot change that way (its state would not read under
// the new parameters) is registered anew instead, its keys fresh, as for
// any changed rule. When that fails too, the limits updated already are
// put back as they were and the error returned. Caller holds c.mu.
func (c *Controller) applyUpdates(s, prev *ruleSet) error {
	u, _ := c.storage.store.(store.Updater)
	var done []int
	for _, i := range s.updates {
		r := &s.rules[i]
		spec := r.spec()
		spec.Name = r.storeName
		err := u.Update(context.Background(), r.id, spec)
		if err == nil {
			done = append(done, i)
			continue
		}
		c.storage.storeN++
		spec.Name = fmt.Sprintf("%s#%d", r.Name, c.storage.storeN)
		id, rerr := c.register(spec)
		if rerr != nil {
			for _, j := range done { // back as the set in force has them
				for k := range prev.rules {
					if o := &prev.rules[k]; o.id == s.rules[j].id {
						was := o.spec()
						was.Name = o.storeName
						_ = u.Update(context.Background(), o.id, was)
					}
				}
			}
			return r.errorf("%w", rerr)
		}
		ctr := newCounters(nPerRule)
		r.id, r.storeName, r.ctr = id, spec.Name, &ctr
	}
	s.updates = nil
	return nil
}

// makePlans groups the rules by category, and within each by tier; rules
// of category "" join every category's plans, rules of tier "" every
// tier's.
func (s *ruleSet) makePlans(fields HeaderFields) error {
	s.plans = make(map[string]*plan)
	for _, r := range s.rules {
		if r.Category != "" {
			s.plans[r.Category] = nil
		}
	}
	var err error
	if s.all, err = s.makeTiered("", fields); err != nil {
		return err
	}
	for cat := range s.plans {
		if s.plans[cat], err = s.makeTiered(cat, fields); err != nil {
			return err
		}
	}
	return nil
}

// makeTiered returns the plan of category cat: with tiers, a plan per tier
// in byTier.
func (s *ruleSet) makeTiered(cat string, fields HeaderFields) (*plan, error) {
	if len(s.tiers) == 0 {
		return s.makePlan(cat, "", fields)
	}
	p := &plan{rules: s.rules, fields: fields}
	for _, t := range s.tiers {
		tp, err := s.makePlan(cat, t, fields)
		if err != nil {
			return nil, err
		}
		p.byTier = append(p.byTier, tp)
	}
	return p, nil
}

func (s *ruleSet) makePlan(cat, tier string, fields HeaderFields) (*plan, error) {
	p := &plan{rules: s.rules, fields: fields}
	var policies []quotaPolicy
	for i := range s.rules {
		r := &s.rules[i]
		if r.Category != "" && r.Category != cat || r.Tier != "" && r.Tier != tier {
			continue
		}
		switch {
		case !r.local():
			p.stored = append(p.stored, i)
		case r.Algorithm.rate():
			p.rates = append(p.rates, i)
		default:
			p.concs = append(p.concs, i)
			p.fair = p.fair || r.Queue.FairShare != Global
		}
		if r.Algorithm.rate() {
			policies = append(policies, r.policy())
		}
	}
	p.local = len(p.stored) == 0
	for _, i := range p.stored {
		p.storeWaits = p.storeWaits || s.rules[i].waits != nil
	}
	for _, i := range p.rates {
		p.local = p.local && s.rules[i].waits == nil
	}
	for _, i := range p.concs {
		p.local = p.local && s.rules[i].lim == nil && s.rules[i].queue == nil
	}
	if p.local && len(p.rates) == 1 && len(p.concs) == 0 {
		p.lone, p.loneAt = &s.rules[p.rates[0]], p.rates[0]
	}
	if len(p.stored) > store.MaxHits {
		return nil, fmt.Errorf("shed: category %q (tier %q) has %d per-key rules, more than the %d one store call decides",
			cat, tier, len(p.stored), store.MaxHits)
	}
	if len(policies) > 0 {
		p.policyV = []string{policyField(policies)}
	}
	return p, nil
}
