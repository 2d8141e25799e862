package shed

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/store"
)

// Option configures New.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// Client is the identity of a request beyond its address, as the
// application knows it after authentication: "" for what the request does
// not have. APIKey is hashed before it reaches a store key.
type Client struct {
	User, APIKey, Tenant string
	// Tier is the client's tier (see Attempt.Tier), resolved by the
	// caller from what it knows of the client (its plan, its key type).
	Tier string
	// Priority is the request's class (see Attempt.Priority), from a
	// header such as X-Priority, the route or the tier; zero is Critical.
	Priority Priority
	// Attributes are the request's values for the "attr:" parts of
	// Composite rules' keys (a model name, a device id; see Key), by
	// name without "attr:".
	Attributes []Attribute
	// Weight is the client's share in a rule that shares its limit fairly
	// (see Attempt.Weight, Queue.FairShare); zero is 1.
	Weight int
	// Signals are the caller's suspicion signals about this request (a
	// failed CAPTCHA, a known-bad fingerprint), fed to the Tracker of
	// WithSuspicion with the request's own.
	Signals []fingerprint.Signal
}

type config struct {
	store       store.Store
	now         func() int64
	log         *slog.Logger
	dryRun      bool
	pen         Penalties
	penIdentity Identity
	resolver    *fingerprint.Resolver
	hasher      *fingerprint.Hasher
	client      func(*http.Request) Client
	cost        func(*http.Request) int64
	actual      func(http.Header) (int64, bool)
	exempt      *exemptions
	suspicion   *suspicion
	obs         Observer
	category    func(*http.Request) string
	hook        func(Decision)
	tierWeights map[string]int
	headers     func(http.Header, Decision)
	reject      func(http.ResponseWriter, *http.Request, Decision)
	fields      HeaderFields
	defTier     string
	early       func(EarlyWarning)
}

// WithStore keeps the per-key rules' state in s (a shared store such as
// Redis) instead of a new store.Memory. Global rules always live in this
// process. The Controller registers a limit in s for each per-key rule and
// override scale, and unregisters it when a Reload or SetOverrides replaces
// it, when New fails, and at Close; limits registered by others are left
// alone.
func WithStore(s store.Store) Option {
	return optionFunc(func(c *config) error {
		if s == nil {
			return errors.New("shed: WithStore(nil)")
		}
		c.store = s
		return nil
	})
}

// WithClock reads the time from now (monotonic nanoseconds, positive)
// instead of the internal clock: for simulations and tests. X-RateLimit-Reset
// is computed on this clock from the wall time read once by New.
func WithClock(now func() int64) Option {
	return optionFunc(func(c *config) error {
		if now == nil {
			return errors.New("shed: WithClock(nil)")
		}
		c.now = now
		return nil
	})
}

// WithLogger sends the Controller's log lines (fail-open, dry-run
// rejections; at most one per kind per second, with a count of those held
// back) to l instead of slog.Default(). Pass a logger over
// slog.DiscardHandler to silence them; the counters in Stats remain.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return errors.New("shed: WithLogger(nil)")
		}
		c.log = l
		return nil
	})
}

// WithDryRun puts every rule, and the penalty check, in dry-run: nothing
// is rejected; what would have been is counted (Stats.DryRun,
// RuleStats.WouldReject), logged and reported in Decision.DryRun.
func WithDryRun() Option {
	return optionFunc(func(c *config) error {
		c.dryRun = true
		return nil
	})
}

// WithPenalties asks p before any rule whether the client is serving a
// timeout, and strikes it for every over-limit rejection. The client is
// identified by id (IP, User, APIKey or Tenant; not Global); an attempt
// without that identity is not checked.
func WithPenalties(p Penalties, id Identity) Option {
	return optionFunc(func(c *config) error {
		if p == nil {
			return errors.New("shed: WithPenalties(nil)")
		}
		if id == Global || id > Tenant {
			return errors.New("shed: penalties need a client identity (IP, User, APIKey or Tenant)")
		}
		c.pen, c.penIdentity = p, id
		return nil
	})
}

// WithResolver finds the middleware's client IP with r (trusted proxies,
// prefix grouping). Without it the TCP peer is the client: no forwarding
// header is ever trusted by default.
func WithResolver(r *fingerprint.Resolver) Option {
	return optionFunc(func(c *config) error {
		if r == nil {
			return errors.New("shed: WithResolver(nil)")
		}
		c.resolver = r
		return nil
	})
}

// WithHasher hashes API keys with h (share its secret across instances
// that share a store). Without it the Controller draws a random key, so its
// hashes mean something in this process only.
func WithHasher(h *fingerprint.Hasher) Option {
	return optionFunc(func(c *config) error {
		if h == nil {
			return errors.New("shed: WithHasher(nil)")
		}
		c.hasher = h
		return nil
	})
}

// WithClient tells the middleware who a request is beyond its address;
// authentication happens before the middleware. f runs on every request
// and must be fast and safe for concurrent use.
func WithClient(f func(*http.Request) Client) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithClient(nil)")
		}
		c.client = f
		return nil
	})
}

// WithCost tells the middleware what a request costs (Attempt.Cost): the
// items of a bulk request, the pages of an export, the tokens an LLM call
// is expected to use. Zero means 1; a negative cost is an error of the
// decision (the request is answered 503). A cost above a rule's limit is
// refused at once (Decision.RetryAfter is ratelimit.Never), never queued.
// f runs on every request and must be fast and safe for concurrent use.
func WithCost(f func(*http.Request) int64) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithCost(nil)")
		}
		c.cost = f
		return nil
	})
}

// WithCategory gives the middleware a request's endpoint category. The
// default is the method class of fingerprint.ClassOf, in any case: "read"
// (GET, HEAD, OPTIONS) or "write" (every other method, extension methods
// included, so that no method escapes the limits of writes). A policy
// file's categories (policy.Policy.CategoryFunc) add routes, normalised.
func WithCategory(f func(*http.Request) string) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithCategory(nil)")
		}
		c.category = f
		return nil
	})
}

// WithDecisionHook calls f with every decision, after it is made and
// before the response: for custom logging and metrics. f runs on the
// request path, so it must be fast and safe for concurrent use. The
// Decision holds no client key.
func WithDecisionHook(f func(Decision)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithDecisionHook(nil)")
		}
		c.hook = f
		return nil
	})
}

// WithHeaders replaces the middleware's response headers: f is called
// with every response's header map and decision, before the handler runs
// or the rejection is written. Decision.WriteHeaders is the default, to
// call from f when only adding to it.
func WithHeaders(f func(http.Header, Decision)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithHeaders(nil)")
		}
		c.headers = f
		return nil
	})
}

// WithRejection replaces how the middleware answers a rejected request
// (after the headers are set). Decision.WriteRejection is the default: the
// status and an RFC 9457 problem body.
func WithRejection(f func(http.ResponseWriter, *http.Request, Decision)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithRejection(nil)")
		}
		c.reject = f
		return nil
	})
}

// WithHeaderFields selects the rate-limit header fields of the default
// response headers (AllFields by default): DraftFields for the IETF
// RateLimit and RateLimit-Policy alone, LegacyFields for X-RateLimit-*
// alone.
func WithHeaderFields(f HeaderFields) Option {
	return optionFunc(func(c *config) error {
		if f == 0 || f&^AllFields != 0 {
			return fmt.Errorf("shed: header fields must be a non-empty set of DraftFields and LegacyFields, got %d", f)
		}
		c.fields = f
		return nil
	})
}

// WithDefaultTier names the tier whose rules decide an attempt whose tier
// no rule names (an unknown plan, or none): a client is never unlimited for
// lack of a tier. It is required when some rule has a Tier, and must be
// one of the rules' tiers.
func WithDefaultTier(tier string) Option {
	return optionFunc(func(c *config) error {
		if tier == "" {
			return errors.New("shed: WithDefaultTier(\"\")")
		}
		c.defTier = tier
		return nil
	})
}

// WithEarlyWarning calls f when a key passes half its limit within the
// first fifth of its window: a runaway client, caught before it hits the
// wall. f gets at most EarlyWarningBurst warnings a second, like the log
// line (at most one a second); Stats counts them all. f runs on the
// request path, so it must be fast and safe for concurrent use.
func WithEarlyWarning(f func(EarlyWarning)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("shed: WithEarlyWarning(nil)")
		}
		c.early = f
		return nil
	})
}

// Observer receives per-event figures that Stats, made of totals, cannot
// carry: for histograms of queue waits and decision latency
// (shed/otelshed's Metrics is one). Its methods run on the request path
// and must be fast, non-blocking and safe for concurrent use.
type Observer interface {
	// ObserveQueueWait reports that an attempt waited wait for a permit
	// of the Global Concurrency or Adaptive rule named rule, and whether
	// it got one.
	ObserveQueueWait(rule string, wait time.Duration, admitted bool)
	// ObserveDecision reports one decision of kind (Decision.Kind) and its
	// latency, from its start to its end, queue waits and store calls
	// included.
	ObserveDecision(kind Kind, latency time.Duration)
}

// WithObserver passes every queue wait and every decision's latency to o.
// It costs a clock read per decision more, only with an observer.
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) error {
		if o == nil {
			return errors.New("shed: WithObserver(nil)")
		}
		c.obs = o
		return nil
	})
}
