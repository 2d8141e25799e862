package shed

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/loggate"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/store"
)

// rule is a validated Rule with what enforces it.
type rule struct {
	Rule
	kind   Kind // of its rejections: Shedding for Global rules, OverLimit otherwise
	dry    bool
	softAt int64 // used units from which the soft-limit warning shows
	rate   localRate
	// waits bounds the requests waiting for the slots a rate rule with
	// MaxWait reserved; nil for a rule that does not wait. canReserve says
	// that the rule's algorithm can reserve at all (store.CheckReserve): a
	// Global one is charged at the slot another rule made the attempt wait
	// for.
	waits      *waiters
	canReserve bool
	sem        permits // a Global Concurrency rule's
	queue      *queueing.Queue
	lanes      [nPriorities]queueing.Lane // queue's, by Priority.lane
	lim        *adaptive.Limiter
	id         store.LimitID
	// cgnatID is the store limit of the rule's keys in carrier-grade NAT
	// ranges, at the parameters scaled by its CGNAT factor; 0 for none.
	cgnatID store.LimitID
	// suspectID is the store limit of tightened keys (WithSuspicion), at
	// the parameters scaled by the tightening floor; 0 for none.
	suspectID store.LimitID
	// prefixID is the store limit of the network prefixes of addresses the
	// rule's full table has no room for (OverflowPrefix); 0 for none.
	prefixID store.LimitID
	// storeName is the name id is registered under: the rule's, or on a
	// reload the rule's and a sequence number.
	storeName string
	limitV    []string // X-RateLimit-Limit, shared by every response
	// itemPrefix is the start of the rule's RateLimit item: `"name";r=`.
	itemPrefix []byte
	problem    []byte // the quota-exceeded body naming this rule
	// early is the Window of a rule that raises early warnings (fixed
	// and sliding windows, whose windows are aligned); 0 for none.
	early int64
	// ctr counts the rule's decisions (rAllowed...); a rule kept across a
	// Reload keeps its counters with its state.
	ctr *counters
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
	byTier  []*plan // with tiers: the plan of each tier (ruleSet.tiers)
	fair    bool    // some rule of concs shares its limit (Queue.FairShare)
	// local says that only Global rules that never wait apply (rate rules
	// that reserve no slot, Concurrency rules without a queue): no key to
	// build, no store call, no wait (decideLocal).
	local bool
	// lone is the rule of a local plan of one rate rule alone, at index
	// loneAt of rules (decideLone); nil for any other plan.
	lone   *rule
	loneAt int
	// storeWaits says that some per-key rule may wait for its slot
	// (Rule.MaxWait): then the concurrency permits are taken after the
	// store call and the wait, so that a waiter holds none.
	storeWaits bool
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
	// set is the rule set in force: swapped whole by Reload and
	// SetOverrides, read once per decision.
	set atomic.Pointer[ruleSet]
	// epoch counts the publications of set that found no decision of the
	// epoch before running: see storeLimits.
	epoch   atomic.Uint64
	mu      sync.Mutex // serializes the writers of set
	storage storage
	reading reading
	answer  answering
	now     func() int64
	log     *slog.Logger
	pen     Penalties
	penID   Identity
	// suspicion tightens suspicious clients' limits (WithSuspicion).
	suspicion *suspicion
	dryAll    bool // WithDryRun: every rule, and the penalty box, in dry-run

	// wallAnchor is the Unix time in ns at monoAnchor on the clock: the
	// wall time of a decision is derived, never read again.
	wallAnchor, monoAnchor int64

	pool  sync.Pool     // of *ticket
	nTick atomic.Uint64 // tickets made, numbering their semShard
	ctr   counters
	logs  logGates
}

// storage is where a Controller's per-key rules keep their state: the
// store and the limits registered in it.
type storage struct {
	store store.Store
	// prefetch is store where it can prefetch a key's entry (a Memory).
	prefetch interface {
		Prefetch(id store.LimitID, key string)
	}
	storeN int // store registrations, for unique store limit names
	// scaledIDs are the store limits registered for overrides, by their
	// parameters (under mu), so that overrides of equal scale share one.
	scaledIDs map[store.Spec]store.LimitID
	limits    storeLimits // under mu
}

// reading is how a Controller reads a request: who sent it, what it
// costs, its category, and who is exempt.
type reading struct {
	hasher  *fingerprint.Hasher
	res     *fingerprint.Resolver
	client  func(*http.Request) Client
	cost    func(*http.Request) int64
	actual  func(http.Header) (int64, bool)
	exempt  *exemptions
	cat     func(*http.Request) string
	defTier string
}

// answering is what a Controller does with a decision besides admitting:
// the hooks and observers it tells, and the response it writes.
type answering struct {
	obs     Observer // WithObserver
	hook    func(Decision)
	tells   bool // hook or obs is set: a decision is told (Controller.tell)
	headers func(http.Header, Decision)
	reject  func(http.ResponseWriter, *http.Request, Decision)
	// ownReject says that reject is the caller's (WithRejection), not
	// Decision.WriteRejection.
	ownReject bool
	fields    HeaderFields
	early     func(EarlyWarning)
	earlyG    loggate.Gate // EarlyWarningBurst a second to the early hook
}

// logGates are the Controller's log lines that are rate limited, one gate
// each: at most one line of a kind per second, the rest counted.
type logGates struct {
	failOpen, dryRun, overflow, prefix, peer, proxy, cgnat, suspect, early, tightenDry loggate.Gate
}

// New returns a Controller over rules (copied). It returns an error
// starting with "shed: " for an invalid rule or option: an empty or
// repeated name, parameters that do not fit the algorithm (checked by the
// store and the concurrency package), more than store.MaxHits per-key rules
// for one category, and the like; the store limits it registered before
// it failed are unregistered then.
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
	c := &Controller{now: cfg.now, log: cfg.log, pen: cfg.pen, penID: cfg.penIdentity, suspicion: cfg.suspicion, dryAll: cfg.dryRun,
		storage: storage{store: cfg.store},
		reading: reading{hasher: cfg.hasher, res: cfg.resolver, client: cfg.client, cost: cfg.cost, actual: cfg.actual, exempt: cfg.exempt, cat: cfg.category},
		answer:  answering{obs: cfg.obs, hook: cfg.hook, headers: cfg.headers, reject: cfg.reject, fields: cfg.fields}}
	c.answer.tells = c.answer.hook != nil || c.answer.obs != nil
	if c.answer.fields == 0 {
		c.answer.fields = AllFields
	}
	if c.storage.store == nil {
		c.storage.store = store.NewMemory()
	}
	c.storage.prefetch, _ = c.storage.store.(interface {
		Prefetch(id store.LimitID, key string)
	})
	if c.now == nil {
		c.now = clock.Now
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.reading.hasher == nil {
		h, err := fingerprint.NewHasher()
		if err != nil {
			return nil, fmt.Errorf("shed: %w", err)
		}
		c.reading.hasher = h
	}
	if c.reading.res == nil {
		c.reading.res, _ = fingerprint.NewResolver() // no options, no error
	}
	if c.reading.cat == nil {
		c.reading.cat = methodCategory
	}
	c.answer.ownReject = c.answer.reject != nil
	if c.answer.reject == nil {
		c.answer.reject = func(w http.ResponseWriter, _ *http.Request, d Decision) { d.WriteRejection(w) }
	}
	c.monoAnchor, c.wallAnchor = c.now(), time.Now().UnixNano()

	c.reading.defTier = cfg.defTier
	c.answer.early = cfg.early
	c.answer.earlyG.Burst = EarlyWarningBurst
	c.ctr = newCounters(nGlobal)
	set, err := c.compile(rules, nil, cfg.dryRun)
	if err != nil {
		c.dropFresh()
		return nil, err
	}
	set.cat = c.reading.cat
	set.weights = cfg.tierWeights
	c.publish(set)
	c.pool.New = func() any { return c.newTicket() }
	return c, nil
}

// Close sheds the requests waiting in the Controller's queues
// (queueing.ErrClosed, answered 503) and makes later waits fail the same
// way, and unregisters every store limit the Controller registered (those
// of its per-key rules and overrides, current and replaced), so that a
// store it shares (WithStore) frees their state. Permits held are still
// returned by their Tokens, except a per-key rule's leases, which are
// gone with their limit. Decisions after Close meet store errors on
// per-key rules (each rule's Failure mode applies).
//
// Close returns the store's error (starting with "shed: ") when it fails
// to unregister a limit; calling Close again tries those again. Otherwise
// Close is idempotent and returns nil.
func (c *Controller) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.set.Load()
	for i := range s.rules {
		if q := s.rules[i].queue; q != nil {
			_ = q.Close() // only fails to remove its own hook
		}
	}
	if err := c.unregisterAll(); err != nil {
		return fmt.Errorf("shed: unregistering the store limits: %w", err)
	}
	return nil
}

// Decide decides a at a.Now (the Controller's clock when zero), waiting at
// most a rule's MaxWait, and its context, for a concurrency permit. When
// the decision is allowed, the work may run and the Token must be done
// exactly once when it ends (Token.Done), on every path; when not, the
// Token is the zero Token (its Done does nothing).
//
// Decide returns an error, deciding nothing, when a.Cost or the decision's
// now is negative, and ctx.Err() when ctx has ended before the decision
// (counted in Stats.Gone), ends while the attempt waits or ends before a
// failing store could decide (an ended context never fails open); what it
// had taken is given back then. Safe for concurrent use.
func (c *Controller) Decide(ctx context.Context, a Attempt) (d Decision, tok Token, err error) {
	// Small enough to inline: the caller's Attempt and Decision are
	// passed on by pointer, not copied through the call's arguments and
	// results (160 and 136 bytes).
	tok, err = c.decideAttempt(ctx, &a, &d)
	return d, tok, err
}

// decideAttempt is Decide, writing the decision to d, which is the zero
// Decision (Decide's result, not yet written).
func (c *Controller) decideAttempt(ctx context.Context, a *Attempt, d *Decision) (Token, error) {
	t := c.get()
	if err := ctx.Err(); err != nil { // the caller has gone: nothing to decide for
		t.ctr[cGone].Add(1)
		c.put(t)
		return Token{}, err
	}
	if s := c.set.Load(); !s.stores && c.plain(a) {
		if p := s.planFor(a.Category, a.Tier); p.local {
			return c.decidePlain(t, s, p, a, d)
		}
	}
	t.ask = *a
	err := c.decideIn(ctx, t, nil, d, false)
	if err != nil || !d.Allowed {
		c.put(t)
		return Token{}, err
	}
	return Token{a: t, gen: t.gen.Load()}, nil
}

// methodCategory is the default category: the method class.
func methodCategory(r *http.Request) string {
	return fingerprint.ClassOf(r.Method).String()
}
