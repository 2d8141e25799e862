package shed

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/store"
)

// localRate is what the concurrency package's single-state rate limiters
// have in common: the Global rate rules.
type localRate interface {
	AllowN(now, n int64) concurrency.Decision
	Refund(now, n int64)
}

// rule is a validated Rule with what enforces it.
type rule struct {
	Rule
	kind   Kind // of its rejections: Shedding for Global rules, OverLimit otherwise
	dry    bool
	softAt int64 // used units from which the soft-limit warning shows
	rate   localRate
	sem    *concurrency.Semaphore
	queue  *queueing.Queue
	lim    *adaptive.Limiter
	id     store.LimitID
	limitV []string // X-RateLimit-Limit, shared by every response
	// itemPrefix is the start of the rule's RateLimit item: `"name";r=`.
	itemPrefix []byte
	problem    []byte // the quota-exceeded body naming this rule
}

// plan is the rules of one category, cheapest first, with the header
// values that depend on the rule set only.
type plan struct {
	rules   []rule   // the Controller's, for the response writer
	rates   []int    // Global rate rules
	concs   []int    // Global Concurrency and Adaptive rules
	stored  []int    // per-key rules, decided by the store in one call
	policyV []string // RateLimit-Policy, shared by every response; nil if no rate rule applies
	fields  HeaderFields
}

// Controller decides admission for attempts against its rules, and is the
// HTTP middleware (Middleware). Rules that apply to one attempt are decided
// together, all or nothing, cheapest first: Global rate rules and Global
// concurrency in this process (what they took is given back when a later
// rule rejects), then every per-key rule in one store call.
//
// A Controller is safe for concurrent use. It starts no goroutine; Close
// sheds the requests waiting in its queues. The zero value is not usable;
// call New.
type Controller struct {
	rules   []rule
	plans   map[string]*plan
	all     *plan // for categories no rule names
	store   store.Store
	now     func() int64
	log     *slog.Logger
	pen     Penalties
	penID   Identity
	hasher  *fingerprint.Hasher
	res     *fingerprint.Resolver
	client  func(*http.Request) Client
	cat     func(*http.Request) string
	hook    func(Decision)
	headers func(http.Header, Decision)
	reject  func(http.ResponseWriter, *http.Request, Decision)
	dryPen  bool
	fields  HeaderFields

	// wallAnchor is the Unix time in ns at monoAnchor on the clock: the
	// wall time of a decision is derived, never read again.
	wallAnchor, monoAnchor int64

	pool    sync.Pool // of *attempt
	ctr     counters
	failLog logGate
	dryLog  logGate
}

// New returns a Controller over rules (copied). It returns an error
// starting with "shed: " for an invalid rule or option: an empty or
// repeated name, parameters that do not fit the algorithm (checked by the
// store and the concurrency package), more than store.MaxHits per-key rules
// for one category, and the like.
func New(rules []Rule, opts ...Option) (*Controller, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("shed: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("shed: no rules")
	}
	c := &Controller{store: cfg.store, now: cfg.now, log: cfg.log, pen: cfg.pen, penID: cfg.penIdentity,
		hasher: cfg.hasher, res: cfg.resolver, client: cfg.client, cat: cfg.category, hook: cfg.hook,
		headers: cfg.headers, reject: cfg.reject, dryPen: cfg.dryRun, fields: cfg.fields}
	if c.fields == 0 {
		c.fields = AllFields
	}
	if c.store == nil {
		c.store = store.NewMemory()
	}
	if c.now == nil {
		c.now = clock.Now
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.hasher == nil {
		h, err := fingerprint.NewHasher()
		if err != nil {
			return nil, fmt.Errorf("shed: %w", err)
		}
		c.hasher = h
	}
	if c.res == nil {
		c.res, _ = fingerprint.NewResolver() // no options, no error
	}
	if c.cat == nil {
		c.cat = methodCategory
	}
	if c.headers == nil {
		c.headers = func(h http.Header, d Decision) { d.WriteHeaders(h) }
	}
	if c.reject == nil {
		c.reject = func(w http.ResponseWriter, _ *http.Request, d Decision) { d.WriteRejection(w) }
	}
	c.monoAnchor, c.wallAnchor = c.now(), time.Now().UnixNano()

	names := make(map[string]bool, len(rules))
	c.rules = make([]rule, len(rules))
	for i := range rules {
		if err := c.build(&c.rules[i], rules[i], cfg.dryRun, names); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.makePlans(); err != nil {
		c.Close()
		return nil, err
	}
	c.ctr = newCounters(nGlobal + nPerRule*len(c.rules))
	c.pool.New = func() any {
		return &attempt{c: c, shard: rand.IntN(len(c.ctr.shards)), buf: make([]byte, 0, 256)}
	}
	return c, nil
}

// build validates r and makes what enforces it.
func (c *Controller) build(dst *rule, r Rule, dryAll bool, names map[string]bool) error {
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
		if dst.sem, err = concurrency.NewSemaphore(r.Limit); err != nil {
			return r.errorf("%w", err)
		}
		if r.MaxWait > 0 {
			qopts := []queueing.Option{queueing.WithMaxWait(r.MaxWait)}
			if r.QueueLength > 0 {
				qopts = append(qopts, queueing.WithMaxLength(r.QueueLength))
			}
			if dst.queue, err = queueing.New(dst.sem, qopts...); err != nil {
				return r.errorf("%w", err)
			}
		}
	case r.local():
		// The store validates the parameters (zero fields that do not
		// apply included); the concurrency package builds the state.
		if err := r.spec().Validate(); err != nil {
			return r.errorf("%w", err)
		}
		switch r.Algorithm {
		case TokenBucket:
			dst.rate, err = concurrency.NewTokenBucket(r.Rate, r.Limit)
		case FixedWindow:
			dst.rate, err = concurrency.NewFixedWindowLimiter(r.Limit, r.Window)
		case SlidingWindow:
			dst.rate, err = concurrency.NewSlidingWindowLimiter(r.Limit, r.Window)
		case SlidingLog:
			dst.rate, err = concurrency.NewSlidingLogLimiter(r.Limit, r.Window)
		}
		if err != nil {
			return r.errorf("%w", err)
		}
	default:
		if dst.id, err = c.store.Register(context.Background(), r.spec()); err != nil {
			return r.errorf("%w", err)
		}
	}
	if r.Algorithm.rate() {
		p := r.policy()
		if err := p.validate(); err != nil {
			return err
		}
		dst.softAt = int64(math.Ceil(r.softLimit() * float64(r.Limit)))
		dst.limitV = []string{fmt.Sprint(r.Limit)}
		dst.itemPrefix = append(appendSFString(nil, r.Name), ";r="...)
		dst.problem = problemBody(Decision{Kind: OverLimit}, r.Name)
	}
	return nil
}

// makePlans groups the rules by category; rules of category "" join every
// plan.
func (c *Controller) makePlans() error {
	c.plans = make(map[string]*plan)
	for _, r := range c.rules {
		if r.Category != "" {
			c.plans[r.Category] = nil
		}
	}
	var err error
	if c.all, err = c.makePlan(""); err != nil {
		return err
	}
	for cat := range c.plans {
		if c.plans[cat], err = c.makePlan(cat); err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) makePlan(cat string) (*plan, error) {
	p := &plan{rules: c.rules, fields: c.fields}
	var policies []Policy
	for i := range c.rules {
		r := &c.rules[i]
		if r.Category != "" && r.Category != cat {
			continue
		}
		switch {
		case !r.local():
			p.stored = append(p.stored, i)
		case r.Algorithm.rate():
			p.rates = append(p.rates, i)
		default:
			p.concs = append(p.concs, i)
		}
		if r.Algorithm.rate() {
			policies = append(policies, r.policy())
		}
	}
	if len(p.stored) > store.MaxHits {
		return nil, fmt.Errorf("shed: category %q has %d per-key rules, more than the %d one store call decides",
			cat, len(p.stored), store.MaxHits)
	}
	if len(policies) > 0 {
		p.policyV = []string{policyField(policies)}
	}
	return p, nil
}

// planFor returns the plan of category cat.
func (c *Controller) planFor(cat string) *plan {
	if p, ok := c.plans[cat]; ok && cat != "" {
		return p
	}
	return c.all
}

// Close sheds the requests waiting in the Controller's queues
// (queueing.ErrClosed, answered 503) and makes later waits fail the same
// way. Permits held are still returned by their Tokens. Close is
// idempotent.
func (c *Controller) Close() error {
	for i := range c.rules {
		if q := c.rules[i].queue; q != nil {
			_ = q.Close() // only fails to remove its own hook
		}
	}
	return nil
}

// Decide decides a at a.Now (the Controller's clock when zero), waiting at
// most a rule's MaxWait, and its context, for a concurrency permit. When
// the decision is allowed, the work may run and the Token must be done
// exactly once when it ends (Token.Done), on every path; when not, the
// Token is the zero Token (its Done does nothing).
//
// Decide returns an error, deciding nothing, when a.Cost is negative, and
// ctx.Err() when ctx ends while the attempt waits; what it had taken is
// given back then. Safe for concurrent use.
func (c *Controller) Decide(ctx context.Context, a Attempt) (Decision, Token, error) {
	at := c.get()
	at.at = a
	var d Decision
	err := c.decide(ctx, at, &d)
	if err != nil || !d.Allowed {
		c.put(at)
		return d, Token{}, err
	}
	return d, Token{a: at, gen: at.gen.Load()}, nil
}

// methodCategory is the default category: the method class.
func methodCategory(r *http.Request) string {
	return fingerprint.ClassOf(r.Method).String()
}
