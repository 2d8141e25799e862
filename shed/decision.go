package shed

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/fingerprint"
)

// Attempt is one unit of work asking for admission: who asks, for what
// category of endpoint, at what cost and when. The middleware fills it from
// the request; other callers (RPC interceptors, job runners) fill it
// themselves.
type Attempt struct {
	// Category selects the rules: those of this category and those of
	// category "".
	Category string
	// IP is the client address per-IP rules key on. The middleware passes
	// the client's group (fingerprint.ClientIP.Group, masked), so that an
	// IPv6 client is one key per /64. The zero Addr is a valid key of its
	// own, "ip:unknown" (every request without an address shares it).
	IP netip.Addr
	// User, APIKey and Tenant are the client's identities; "" means the
	// request has none, and rules of that identity do not apply to it. The
	// API key is hashed (keyed HMAC) before it reaches the store; user and
	// tenant ids are used as given up to MaxIdentity bytes and hashed
	// beyond (or when they start with "#").
	User, APIKey, Tenant string
	// Attributes are the values of Composite rules' key parts other than
	// identities (see Key): by attribute name for "attr:" parts, or by
	// the whole part name ("route", "ja4", "header:X-Model"). The
	// middleware passes Client.Attributes and reads the others from the
	// request. A part without a value counts with the empty value.
	Attributes []Attribute
	// Tier is the client's tier (its plan, or its client type): it
	// selects the rules of that tier (Rule.Tier). A tier no rule names,
	// "" included, is decided as the Controller's default tier.
	Tier string
	// Cost is how many units the attempt takes from each rule; zero means
	// 1, negative is an error.
	Cost int64
	// CGNAT reports that IP lies in a carrier-grade NAT range, where many
	// users share one address (fingerprint.ClientIP.CGNAT; the middleware
	// sets it): per-IP rules raise their limit for it (Rule.CGNATFactor) or
	// step aside for a stronger identity (Rule.CGNATDefer).
	CGNAT bool
	// Tightened decides the attempt's per-key rules on their tightened
	// limits, as for a suspicious client, on a Controller WithSuspicion
	// (its middleware sets it from the score; other callers may set it from
	// their own judgement). Without WithSuspicion it changes nothing.
	Tightened bool
	// reasons are why the middleware tightened it.
	reasons fingerprint.Reasons
	// Priority is how much the attempt matters to the queue of a Global
	// Concurrency rule (Rule.Queue) or an Adaptive rule (its Limiter's):
	// higher classes are served first and shed last. The zero value is Critical; a value outside the four classes
	// is an error.
	Priority Priority
	// Weight is the attempt's share in a rule that shares its limit
	// fairly (Queue.FairShare): an identity whose attempts weigh 2 is
	// guaranteed twice the share of one whose attempts weigh 1. The weight
	// of an identity's latest attempt stands for all of its attempts then
	// waiting or running. Zero means 1; a weight outside [0, MaxWeight] is
	// an error.
	Weight int
	// Now is the instant of the decision in monotonic nanoseconds on the
	// Controller's clock (WithClock; internal clock.Now by default), from
	// which X-RateLimit-Reset is derived; zero means read that clock.
	Now int64
	// Queued is how long the attempt waited in the server before this
	// decision, from its arrival at the host; zero when unknown, negative
	// counts as zero. An Adaptive rule whose algorithm bounds it
	// (adaptive.QueueBounder: Default, 20ms, 2.5ms under a standing
	// overload) sheds an attempt that waited longer, unless its Priority
	// is CriticalPlus. The middleware fills it when the server's
	// connection contexts carry arrival times (WithArrivals:
	// connguard.Guard.ConnContext does it).
	Queued time.Duration
}

// Kind classifies a Decision for the response.
type Kind uint8

const (
	// Admitted: the work may run.
	Admitted Kind = iota
	// OverLimit: the client is over one of its limits; HTTP 429 with the
	// problem type quota-exceeded.
	OverLimit
	// Shedding: the server sheds load for its own protection (a global
	// cap, a concurrency or adaptive limit, a queue that timed out, a store
	// that failed closed); HTTP 503 with temporary-reduced-capacity.
	Shedding
	// Penalized: the client is serving a penalty timeout for abuse; HTTP
	// 429 with abnormal-usage-detected.
	Penalized
)

// String returns "admitted", "over_limit", "shedding" or "penalized".
func (k Kind) String() string {
	switch k {
	case Admitted:
		return "admitted"
	case OverLimit:
		return "over_limit"
	case Shedding:
		return "shedding"
	case Penalized:
		return "penalized"
	}
	return "unknown"
}

// StatusCode returns the HTTP status of a response for k: 200 for
// Admitted (the handler chooses its own), 429 or 503.
func (k Kind) StatusCode() int {
	switch k {
	case OverLimit, Penalized:
		return http.StatusTooManyRequests
	case Shedding:
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// Decision is the outcome of one Attempt. It is a plain value.
type Decision struct {
	// Allowed reports whether the work may run. In dry-run nothing is
	// rejected: Allowed is true and DryRun says what enforcement would
	// have done.
	Allowed bool
	// Kind says why, for the response: Admitted, or the kind of rejection.
	Kind Kind
	// Rule is the name of the rule that decided: the one that rejected, or
	// when allowed the rate rule with the fewest requests remaining (whose
	// figures the headers report). "" when no rule applied, and for a
	// penalty.
	Rule string
	// Limit, Remaining and Reset describe the deciding rate rule: its
	// quota, what is left of it after this decision, and when it next
	// serves this client: for an admission, how long until the quota is
	// whole again; for a rejection, RetryAfter (when the rejected attempt
	// would be admitted; how long until the quota is whole again when it
	// never will). The RateLimit field's t and X-RateLimit-Reset say Reset,
	// so on a rejection they agree with Retry-After. Zero when no rate rule
	// applied.
	Limit, Remaining int64
	Reset            time.Duration
	// RetryAfter is, for a rejection, the wait after which the same
	// attempt would be admitted if nothing else happened (never earlier
	// than the truth); ratelimit.Never when it never will (a cost above
	// the limit). For a concurrency or adaptive rejection, where no exact
	// figure exists, it is a hint: the predicted service time, at least a
	// second. Zero when allowed.
	RetryAfter time.Duration
	// Warning reports that a rate rule (WarningRule) is past its soft
	// limit: the client has used SoftLimit or more of that quota.
	Warning     bool
	WarningRule string
	// Tightened reports that the client's limits were tightened
	// (Attempt.Tightened), and Suspicion why: the reason codes of its
	// suspicion score (WithSuspicion), never the raw signals.
	Tightened bool
	Suspicion fingerprint.Reasons
	// DryRun reports that a dry-run rule (DryRunRule) or a dry-run penalty
	// would have rejected this attempt, and DryRunKind how.
	DryRun     bool
	DryRunRule string
	DryRunKind Kind
	// FailedOpen reports that the store failed and the attempt was
	// admitted because every store rule involved fails open.
	FailedOpen bool

	// rule is the index of the deciding rule and plan the rules that
	// applied (headers precomputed): for the response writer.
	rule int
	plan *plan
	// wall is the Unix time of the decision in nanoseconds, for
	// X-RateLimit-Reset.
	wall int64
}

// Outcome is what Token.Done reports about the work: Success, Ignore or
// Dropped (see adaptive.Outcome).
type Outcome = adaptive.Outcome

// Outcomes of the work, for Token.Done.
const (
	// Success: the work completed; its latency is a sample of the service.
	Success = adaptive.Success
	// Ignore: the sample says nothing about the service (the client went
	// away, the handler panicked); only permits are returned.
	Ignore = adaptive.Ignore
	// Dropped: the work failed from overload (a timeout, a 503); a
	// congestion signal for adaptive limits.
	Dropped = adaptive.Dropped
)
