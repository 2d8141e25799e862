package shed

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// Identity is what a rule counts per: one client address, user, API key or
// tenant, a composite of those and of request attributes (Composite), or
// every request together (Global).
type Identity uint8

const (
	// Global counts every request the rule applies to on one state, in
	// this process: a server-wide cap. A Global rule protects the server, so
	// its rejections are 503s.
	Global Identity = iota
	// IP counts per client address group (fingerprint.ClientIP.Group in the
	// middleware: one IPv4 address, one IPv6 /64 by default).
	IP
	// User counts per user id, as given by the caller.
	User
	// APIKey counts per API key; the key is hashed (keyed HMAC) before it
	// reaches a store key.
	APIKey
	// Tenant counts per tenant id, as given by the caller.
	Tenant
	// Composite counts per the parts of the rule's Key: identities and
	// request attributes together (tenant and model, IP and route), or an
	// attribute alone (a header, a JA4). See Key.
	Composite
)

// String returns "global", "ip", "user", "api_key", "tenant" or
// "composite".
func (i Identity) String() string {
	switch i {
	case Global:
		return "global"
	case IP:
		return "ip"
	case User:
		return "user"
	case APIKey:
		return "api_key"
	case Tenant:
		return "tenant"
	case Composite:
		return "composite"
	}
	return fmt.Sprintf("Identity(%d)", uint8(i))
}

// Algorithm is how a rule counts: one of the store's algorithms (the same
// values, so that a per-key rule's algorithm is its store limit's), or
// Adaptive, which only a Global rule can use.
type Algorithm uint8

const (
	// TokenBucket is an exact token bucket of Limit tokens refilled at
	// Rate (GCRA); see store.TokenBucket.
	TokenBucket = Algorithm(store.TokenBucket)
	// FixedWindow admits Limit per aligned Window; up to 2·Limit across a
	// boundary, so never for authentication.
	FixedWindow = Algorithm(store.FixedWindow)
	// SlidingWindow is the approximate sliding-window counter of Limit per
	// Window (see ratelimit.SlidingWindow for its error bound).
	SlidingWindow = Algorithm(store.SlidingWindow)
	// SlidingLog admits at most Limit in any interval of length Window,
	// exactly; its memory grows with Limit.
	SlidingLog = Algorithm(store.SlidingLog)
	// Concurrency holds at most Limit requests at once: a semaphore in this
	// process for a Global rule (sharded over cores when the rule has no
	// MaxWait and Limit reaches 8 permits a shard, 64 at GOMAXPROCS 2;
	// exact either way), expiring store leases (LeaseTTL) per key.
	Concurrency = Algorithm(store.Concurrency)
	// Adaptive holds at most the limit of an adaptive.Limiter at once; the
	// limit follows the latency and drops that Token.Done reports. With
	// adaptive.Default it also sheds a share of the requests while the Go
	// scheduling delay is high (adaptive.Shedder: a CPU-bound server that
	// no limit binds), and each request that waited past its queue bound
	// (20ms; 2.5ms under a standing overload) before the middleware saw it
	// (adaptive.QueueBounder; Attempt.Queued, which the middleware knows
	// behind a connguard.Guard). Global only.
	Adaptive = Concurrency + 1
)

// String returns the algorithm's name, such as "token_bucket" (the
// store's names, and "adaptive").
func (a Algorithm) String() string {
	if a == Adaptive {
		return "adaptive"
	}
	return store.Algorithm(a).String()
}

// rate reports whether a counts a rate or quota (as opposed to
// concurrency), the limits that RateLimit header fields describe.
func (a Algorithm) rate() bool { return a >= TokenBucket && a <= SlidingLog }

// FailureMode is what a rule does when its store fails to decide
// (store.ErrUnavailable, a deadline, any store error).
type FailureMode uint8

const (
	// FailOpen admits the request as if the rule were not there. Every
	// such admission is counted (RuleStats.FailOpen) and logged, rate
	// limited: never silent.
	FailOpen FailureMode = iota
	// FailClosed rejects the request with 503 (the server cannot check the
	// limit, which is not the client's fault).
	FailClosed
)

// String returns "fail_open" or "fail_closed".
func (f FailureMode) String() string {
	switch f {
	case FailOpen:
		return "fail_open"
	case FailClosed:
		return "fail_closed"
	}
	return fmt.Sprintf("FailureMode(%d)", uint8(f))
}

// DefaultCGNATFactor multiplies a per-IP rule's limit for a client address
// in a carrier-grade NAT range when Rule.CGNATFactor is zero: one such
// address stands for many users.
const DefaultCGNATFactor = 10

// CGNATCapacity bounds the keys a per-IP rule keeps for addresses in
// carrier-grade NAT ranges (they have a store limit of their own): few
// addresses, many users behind each. A smaller Capacity of the rule wins.
const CGNATCapacity = 1024

// DefaultSoftLimit is the share of a quota past which responses carry
// X-RateLimit-Warning, when Rule.SoftLimit is zero.
const DefaultSoftLimit = 0.8

// Rule is one limit: which requests it applies to (Category), what it
// counts per (Identity), how (Algorithm and its parameters) and what
// happens at the edges (Failure, SoftLimit, DryRun). Rules that apply to the
// same request are decided together, all or nothing. Fields that do not
// apply to the algorithm must be left zero; New rejects them rather than
// ignore them.
//
// The login example of the field, 20 per 15 minutes per IP and 5 per 15
// minutes per account, is two rules:
//
//	{Name: "login-ip", Category: "auth", Identity: shed.IP, Algorithm: shed.SlidingLog,
//		Limit: 20, Window: 15 * time.Minute, Failure: shed.FailClosed},
//	{Name: "login-user", Category: "auth", Identity: shed.User, Algorithm: shed.SlidingLog,
//		Limit: 5, Window: 15 * time.Minute, Failure: shed.FailClosed},
type Rule struct {
	// Name identifies the rule in Stats, in Decision.Rule and, for rate
	// rules, as the policy name of the RateLimit header fields (so it is
	// public): 1 to 64 printable ASCII bytes, unique within a Controller.
	Name string
	// Category is the endpoint category the rule applies to ("read",
	// "write", "auth", "expensive", or any name); "" applies to every
	// request.
	Category string
	// Identity is what the rule counts per. A rule whose identity a request
	// does not carry (no user, no API key, no tenant) does not apply to it.
	Identity Identity
	// Key is the parts a Composite rule counts per, such as
	// Key{"tenant", "attr:model"} or Key{"ip", "route"} (only, and
	// required, for Composite; see Key).
	Key Key
	// Algorithm is how the rule counts; the zero value is rejected.
	Algorithm Algorithm
	// Limit is the burst of a TokenBucket, the requests per Window of the
	// window algorithms, the requests at once of Concurrency. It must be
	// positive, except for Adaptive, where it must be zero (the limiter
	// decides).
	Limit int64
	// Rate is the refill rate of a TokenBucket (only).
	Rate ratelimit.Rate
	// Window is the window of FixedWindow, SlidingWindow and SlidingLog
	// (only); zero for a window of calendar months.
	Window time.Duration
	// Calendar places the windows of FixedWindow and SlidingWindow rules
	// (see store.Calendar), the same on every store and for Global rules:
	// the zero value is UTC (a day window resets at midnight UTC, a week
	// on Monday); Offset names another zone's fixed offset, Months makes
	// each window that many calendar months ("100 a month, reset on the
	// first at midnight UTC" is Limit 100, Calendar{Months: 1}).
	Calendar store.Calendar
	// LeaseTTL is how long a per-key Concurrency permit lives in the store
	// if its request never finishes (only, and required, for per-key
	// Concurrency): a crashed holder cannot leak permits forever.
	LeaseTTL time.Duration
	// Capacity bounds the keys the store keeps for a per-key rule (see
	// store.Spec.Capacity); zero means the store's default.
	Capacity int
	// MaxBytes is the per-key rule's byte budget: New rejects a rule whose
	// worst case, every key of its Capacity live and grown at once in a
	// Memory store (store.Spec.MemoryBytes; its CGNAT and tightened keys'
	// limits included), exceeds it, naming the figures. Zero means
	// DefaultMaxBytes; negative is rejected. A sliding log's keys grow
	// with Limit (16 bytes an admission): 1,000 an hour at the default
	// capacity is 1 GiB, so it needs a lower Capacity or another
	// algorithm. Per-key rules only.
	MaxBytes int64
	// Overflow is what a per-key rule does with a new key when the store's
	// table of keys is full of live ones (a key flood): reject it
	// (concurrency.OverflowReject, the zero value), count it on one
	// bounded state shared by all such keys (concurrency.OverflowShare),
	// or, for an IP rule, decide it on a bounded limit of its network
	// prefix (OverflowPrefix, see Prefix). A full table is the server's
	// condition, not the client's: such a rejection is a 503 with a short
	// Retry-After, never a 429 and never a penalty strike, and it is
	// counted in RuleStats.Overflowed.
	Overflow concurrency.Overflow
	// Prefix is the network prefix limit of OverflowPrefix (only): prefix
	// lengths and the factor on Limit; the zero value is the defaults.
	Prefix Prefix
	// Count says which finished requests a rate rule's charge stands for:
	// CountAll (zero), or only failures of some kind, the others given
	// back when the request is done (the middleware knows its status;
	// Decide's callers tell it with Token.DoneStatus). Rate rules only.
	// A TokenBucket gives back only what the request's tokens still weigh
	// when it is done: nothing once the bucket has refilled them (a burst
	// of 2 refilled 1 a second, a success at 0 done after a failure at
	// 1 s: two failures admitted at 1 s, not three). Its known limit
	// (ratelimit.GCRA.RefundLate): a request given back after requests
	// admitted before it were given back can still return up to its cost
	// more than the bucket holds. Windows give back in the window that
	// counted the request, a SlidingLog never an entry made after it: they
	// stay exact.
	Count Count
	// CGNATFactor multiplies an IP rule's Limit (and a token bucket's
	// refill) for a client address in a carrier-grade NAT range
	// (Attempt.CGNAT): at least 1, which turns it off; zero means
	// DefaultCGNATFactor. IP rules only. Such keys count on a store limit
	// of their own, at the scaled parameters, of at most CGNATCapacity
	// keys.
	CGNATFactor float64
	// CGNATDefer makes an IP rule not apply to a client address in a
	// carrier-grade NAT range when the attempt carries a stronger identity
	// (a user or an API key): that identity's rules limit it instead. IP
	// rules only. Both CGNAT choices are counted (Stats.CGNAT) and logged,
	// at most a line a second, for audit.
	CGNATDefer bool
	// Limiter is the adaptive limiter of an Adaptive rule (only, and
	// required). The Controller reports every admitted request's outcome
	// to it; it must not be shared with another rule.
	Limiter *adaptive.Limiter
	// MaxWait lets a request wait up to MaxWait instead of being rejected
	// at once: for a Global Concurrency or Adaptive rule's permit, or for
	// its turn on a TokenBucket rule or a FixedWindow rule of a fixed
	// length (Global or per key), whose exact slot is reserved (the limit
	// is charged now as if the request were admitted then: the bucket's
	// next token, the start of a later window; see
	// ratelimit.GCRA.ReserveN) and who then waits until it comes, or
	// until its context ends, which cancels the reservation. A request
	// whose context deadline falls before its slot is rejected at once,
	// with Retry-After, and reserves nothing. Every other token-bucket or
	// fixed-window rule of the request is charged at that slot too, since
	// the request starts then (one that has no room then rejects it), so
	// no rule sees a start after its charge; a sharded Global rule (a
	// TokenBucket burst of 128 and more, a FixedWindow, without MaxWait)
	// cannot and is charged at once. A Global rule with MaxWait is kept
	// unsharded. Zero means no waiting. Short waits (NGINX's limit_req delay) suit calls
	// between internal services, which would rather be slowed than fail.
	MaxWait time.Duration
	// QueueLength bounds how many requests wait at once for a Global
	// Concurrency rule or a rate rule with MaxWait (a request that
	// finds them all waiting is decided as if MaxWait were zero); zero
	// means queueing.DefaultMaxLength (1024).
	QueueLength int
	// Queue is the waiting discipline of a Global Concurrency rule with
	// MaxWait: order, CoDel, deadline awareness and a reserve for critical
	// work (see Queue and Attempt.Priority).
	Queue Queue
	// Failure is what the rule does when the store fails (store rules
	// only: per-key rules; Global rules live in this process and cannot
	// fail). The zero value is FailOpen.
	Failure FailureMode
	// SoftLimit is the share of a rate rule's quota past which responses
	// carry X-RateLimit-Warning, in (0, 1]; zero means DefaultSoftLimit.
	SoftLimit float64
	// DryRun makes the rule count and log the requests it would reject
	// instead of rejecting them (see WithDryRun for every rule at once).
	DryRun bool
	// Tier limits the rule to attempts of one tier (Attempt.Tier: a plan
	// such as "free" or "pro", a client type such as "automation"); ""
	// applies to every tier. An attempt whose tier no rule names is
	// decided as the default tier (WithDefaultTier), never as unlimited.
	// A tiered limit is one rule per tier, each with its own name.
	Tier string
}

// reserves reports whether the rule waits for reserved rate slots: a
// TokenBucket rule, or a FixedWindow rule of a fixed length, with MaxWait
// (store.CheckReserve).
func (r *Rule) reserves() bool {
	return r.MaxWait > 0 && r.Algorithm.rate() && store.CheckReserve(r.spec()) == nil
}

// maxWaiters returns the bound on the requests waiting for the rule.
func (r *Rule) maxWaiters() int64 {
	if r.QueueLength == 0 {
		return queueing.DefaultMaxLength
	}
	return int64(r.QueueLength)
}

// local reports whether the rule is decided in this process rather than by
// the store.
func (r *Rule) local() bool { return r.Identity == Global }

// errorf returns a validation error naming the rule.
func (r *Rule) errorf(format string, args ...any) error {
	return fmt.Errorf("shed: rule %q: "+format, append([]any{r.Name}, args...)...)
}

// validate checks what the store and the concurrency package do not.
func (r *Rule) validate() error {
	if r.Name == "" || len(r.Name) > 64 {
		return fmt.Errorf("shed: rule name must be 1 to 64 bytes, got %q", r.Name)
	}
	for i := 0; i < len(r.Name); i++ {
		if c := r.Name[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("shed: rule name %q has a byte outside printable ASCII", r.Name)
		}
	}
	if len(r.Tier) > 64 {
		return r.errorf("tier must be at most 64 bytes, got %d", len(r.Tier))
	}
	if r.Identity > Composite {
		return r.errorf("unknown identity %v", r.Identity)
	}
	if r.Identity == Composite {
		if _, err := r.Key.parts(); err != nil {
			return r.errorf("%w", err)
		}
	} else if r.Key != (Key{}) {
		return r.errorf("a key applies only to %v rules, not %v", Composite, r.Identity)
	}
	if r.Algorithm < TokenBucket || r.Algorithm > Adaptive {
		return r.errorf("unknown algorithm %v", r.Algorithm)
	}
	if r.Failure > FailClosed {
		return r.errorf("unknown failure mode %v", r.Failure)
	}
	if r.MaxBytes < 0 {
		return r.errorf("byte budget must not be negative (or 0 for %d), got %d", DefaultMaxBytes, r.MaxBytes)
	}
	if math.IsNaN(r.SoftLimit) || r.SoftLimit < 0 || r.SoftLimit > 1 {
		return r.errorf("soft limit must be in (0, 1] (or 0 for the default), got %v", r.SoftLimit)
	}
	switch {
	case r.Count > CountAuthFailures:
		return r.errorf("unknown count %v", r.Count)
	case r.Count != CountAll && !r.Algorithm.rate():
		return r.errorf("a count applies only to rate rules, not %v", r.Algorithm)
	case (r.CGNATFactor != 0 || r.CGNATDefer) && r.Identity != IP:
		return r.errorf("CGNAT handling applies only to %v rules", IP)
	case r.CGNATFactor != 0 && (math.IsNaN(r.CGNATFactor) || math.IsInf(r.CGNATFactor, 0) || r.CGNATFactor < 1):
		return r.errorf("CGNAT factor must be at least 1 and finite (or 0 for %d), got %v", DefaultCGNATFactor, r.CGNATFactor)
	}
	if err := r.validatePrefix(); err != nil {
		return err
	}
	if r.Algorithm == Adaptive {
		switch {
		case r.Limiter == nil:
			return r.errorf("an adaptive rule needs a Limiter")
		case r.Identity != Global:
			return r.errorf("an adaptive rule must be Global, not %v", r.Identity)
		case r.Limit != 0:
			return r.errorf("an adaptive rule takes its limit from its Limiter; Limit must be 0, got %d", r.Limit)
		}
	} else if r.Limiter != nil {
		return r.errorf("a Limiter applies only to %v, not %v", Adaptive, r.Algorithm)
	}
	queues := r.Identity == Global && (r.Algorithm == Concurrency || r.Algorithm == Adaptive)
	waits := queues || r.reserves()
	switch {
	case r.MaxWait < 0:
		return r.errorf("max wait must not be negative, got %v", r.MaxWait)
	case r.MaxWait > ratelimit.MaxReserveWait:
		return r.errorf("max wait must be at most %v, got %v", ratelimit.MaxReserveWait, r.MaxWait)
	case r.MaxWait > 0 && !waits:
		return r.errorf("max wait applies only to Global %v and %v rules and to %v and %v rules of a fixed length",
			Concurrency, Adaptive, TokenBucket, FixedWindow)
	case r.QueueLength < 0:
		return r.errorf("queue length must not be negative, got %d", r.QueueLength)
	case r.QueueLength > 0 && (r.MaxWait == 0 || r.Algorithm != Concurrency && !r.reserves()):
		return r.errorf("a queue length applies only to a Global %v rule or a rate rule with a max wait", Concurrency)
	case r.Queue.FairShare > Tenant:
		return r.errorf("unknown fair-share identity %v", r.Queue.FairShare)
	case r.Queue.FairShare != Global && (r.MaxWait == 0 || !queues):
		return r.errorf("fair share applies only to a Global %v or %v rule with a max wait", Concurrency, Adaptive)
	case r.Queue.FairShare != Global && r.Algorithm == Adaptive && !r.Limiter.FairShare():
		return r.errorf("fair share on an %v rule needs a Limiter whose queue has it: adaptive.WithQueue(queueing.WithFairShare())", Adaptive)
	case r.Queue.withoutFairShare() != (Queue{}) && (r.MaxWait == 0 || r.Algorithm != Concurrency):
		return r.errorf("a queue discipline applies only to a Global %v rule with a max wait", Concurrency)
	case r.Queue.Order > queueing.AdaptiveLIFO:
		return r.errorf("unknown queue order %v", r.Queue.Order)
	case math.IsNaN(r.Queue.Reserve) || r.Queue.Reserve < 0 || r.Queue.Reserve >= 1:
		return r.errorf("a queue reserve must be in [0, 1), got %v", r.Queue.Reserve)
	}
	if r.local() {
		if r.Failure != FailOpen {
			return r.errorf("a Global rule lives in this process and cannot fail; leave Failure zero")
		}
		if r.Capacity != 0 {
			return r.errorf("a capacity (of keys) does not apply to a Global rule")
		}
		if r.MaxBytes != 0 {
			return r.errorf("a byte budget (of a key table) does not apply to a Global rule")
		}
		if r.Overflow != concurrency.OverflowReject {
			return r.errorf("an overflow policy (of a full key table) does not apply to a Global rule")
		}
		if r.LeaseTTL != 0 {
			return r.errorf("a lease TTL applies only to per-key %v rules", Concurrency)
		}
	}
	return nil
}

// spec returns the store limit of a per-key rule.
func (r *Rule) spec() store.Spec {
	alg := store.Algorithm(r.Algorithm) // the constants are the store's
	return store.Spec{Name: r.Name, Algorithm: alg, Limit: r.Limit, Rate: r.Rate,
		Window: r.Window, Capacity: r.Capacity, Overflow: r.storeOverflow(), Calendar: r.Calendar, LeaseTTL: r.LeaseTTL}
}

// cgnatFactor returns the rule's CGNAT factor; 1 for rules other than IP.
func (r *Rule) cgnatFactor() float64 {
	switch {
	case r.Identity != IP:
		return 1
	case r.CGNATFactor == 0:
		return DefaultCGNATFactor
	}
	return r.CGNATFactor
}

// softLimit returns the rule's soft-limit share.
func (r *Rule) softLimit() float64 {
	if r.SoftLimit == 0 {
		return DefaultSoftLimit
	}
	return r.SoftLimit
}

// averageMonth is the mean length of a Gregorian month, 30.436875 days.
const averageMonth = 2629746 * time.Second

// policy returns the RateLimit-Policy entry of a rate rule: a token bucket
// holds Limit tokens and refills completely in Limit emission intervals;
// the window algorithms hold Limit per Window.
func (r *Rule) policy() quotaPolicy {
	p := quotaPolicy{Name: r.Name, Quota: r.Limit, Window: r.Window}
	if m := r.Calendar.Months; m > 0 {
		p.Window = time.Duration(m) * averageMonth // the field has no calendar: its mean
	}
	if r.Algorithm == TokenBucket {
		// Validated: the interval is at least 1 ns and burst × interval
		// fits the concurrency package's span bound (2^59 ns).
		interval := (int64(r.Rate.Per) + r.Rate.Count - 1) / r.Rate.Count
		p.Window = time.Duration(interval * r.Limit)
	}
	return p
}
