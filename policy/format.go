package policy

// File is the JSON document of a policy file, field for field. Durations
// are strings (see the package doc); enumerations are the lower-case names
// of shed's String methods ("ip", "token_bucket", "fail_closed").
type File struct {
	// Version is the format version; 1 is the only one.
	Version int `json:"version"`
	// DryRun puts every rule and the penalty check in dry-run.
	DryRun bool `json:"dry_run,omitempty"`
	// Categories map requests to endpoint categories, first match wins;
	// a request no category matches falls in its method class ("read",
	// "write").
	Categories []CategorySpec `json:"categories,omitempty"`
	// Rules are the limits, layered: every rule of a request's category
	// and every rule without a category apply to it, all or nothing.
	Rules []RuleSpec `json:"rules"`
	// Penalties configures the progressive penalty box; absent means none.
	Penalties *PenaltySpec `json:"penalties,omitempty"`
	// Tiers declares the client tiers that rules may depend on.
	Tiers *TiersSpec `json:"tiers,omitempty"`
	// Overrides scale one client's limit of a rule until an expiry.
	Overrides []OverrideSpec `json:"overrides,omitempty"`
	// Cost says what a request costs from header fields: the estimate
	// charged up front from a request header, and the true cost, charged
	// or given back after the work, from a response header the handler
	// sets (an LLM call's tokens). Absent: every request costs 1.
	Cost *CostSpec `json:"cost,omitempty"`
	// Exempt names the requests let through unlimited, counted: client
	// networks ("10.0.0.0/8") and paths ("/healthz"; "/internal/" covers
	// the subtree).
	Exempt *ExemptSpec `json:"exempt,omitempty"`
	// Suspicion tightens the per-key limits of clients whose signals look
	// automated (shed.WithSuspicion); absent means none.
	Suspicion *SuspicionSpec `json:"suspicion,omitempty"`
}

// SuspicionSpec is a shed.Suspicion: a tracker of Capacity clients and a
// scale that tightens limits to Floor (in (0, 1]) above Threshold (in
// [0, 1)). DemoteTo caps a tightened client's priority ("sheddable",
// "sheddable_plus", "critical"); DryRun tightens nothing and counts what
// tightening would have rejected.
type SuspicionSpec struct {
	Capacity  int     `json:"capacity"`
	Threshold float64 `json:"threshold"`
	Floor     float64 `json:"floor"`
	DemoteTo  string  `json:"demote_to,omitempty"`
	DryRun    bool    `json:"dry_run,omitempty"`
}

// ExemptSpec is a shed.Exemptions.
type ExemptSpec struct {
	CIDRs []string `json:"cidrs,omitempty"`
	Paths []string `json:"paths,omitempty"`
}

// CostSpec names the header fields of a request's cost (shed.WithCost,
// shed.WithActualCost): whole non-negative numbers; a request without the
// request header costs Default (1 when absent), a response without the
// response header keeps the estimate.
type CostSpec struct {
	RequestHeader  string `json:"request_header,omitempty"`
	ResponseHeader string `json:"response_header,omitempty"`
	Default        int64  `json:"default,omitempty"`
}

// TiersSpec declares the tiers: the attribute of the client they come
// from (documentation for the caller's resolver: "plan", "client_type"),
// their names, and the default tier that decides a client whose tier is
// unknown or missing.
type TiersSpec struct {
	Attribute string   `json:"attribute,omitempty"`
	Names     []string `json:"names"`
	Default   string   `json:"default"`
	// Weights are the fair-share weights of declared tiers
	// (shed.WithTierWeights), 1 to shed.MaxWeight; a tier not listed
	// weighs 1.
	Weights map[string]int `json:"weights,omitempty"`
}

// TierLimits are the limits of one tier of a rule; absent fields keep the
// rule's own.
type TierLimits struct {
	Limit  int64     `json:"limit,omitempty"`
	Rate   *RateSpec `json:"rate,omitempty"`
	Window string    `json:"window,omitempty"`
}

// OverrideSpec is a shed.Override: Key's limits of Rule (every tier of
// it) times Factor until Until (RFC 3339).
type OverrideSpec struct {
	Rule   string  `json:"rule"`
	Key    string  `json:"key"`
	Factor float64 `json:"factor"`
	Until  string  `json:"until"`
}

// CategorySpec is one endpoint category: the requests whose route matches
// one of Routes and whose method class is one of Methods.
type CategorySpec struct {
	Name string `json:"name"`
	// Routes are patterns: an exact path ("/login"), a prefix ending in
	// "*" ("/api/reports/*"), either optionally after a method as in
	// http.ServeMux ("POST /login"). Empty matches every route.
	Routes []string `json:"routes,omitempty"`
	// Methods are method classes, "read" or "write" (every method but
	// GET, HEAD and OPTIONS, in any case, is a write); empty
	// matches every method.
	Methods []string `json:"methods,omitempty"`
}

// RuleSpec is one shed.Rule. Fields that do not apply to the algorithm
// must be absent.
type RuleSpec struct {
	Name     string `json:"name"`
	Category string `json:"category,omitempty"`
	// Identity is what the rule counts per: "global", "ip", "user",
	// "api_key" or "tenant"; "composite" (or absent) with Key.
	Identity string `json:"identity,omitempty"`
	// Key makes the rule count per a composite of parts (shed.Key):
	// identities ("ip", "user", "api_key", "tenant"), "route", "ja4",
	// "header:<Name>" (hashed) and "attr:<name>" (an attribute the
	// application gives, shed.Client.Attributes), such as
	// ["tenant", "attr:model"] or ["ip", "route"]; at most
	// shed.MaxKeyParts.
	Key       []string `json:"key,omitempty"`
	Algorithm string   `json:"algorithm"`
	Limit     int64    `json:"limit,omitempty"`
	// Rate is the refill of a token bucket.
	Rate *RateSpec `json:"rate,omitempty"`
	// Window is the window of the window algorithms.
	Window string `json:"window,omitempty"`
	// LeaseTTL is the lease of a per-key concurrency rule.
	LeaseTTL string `json:"lease_ttl,omitempty"`
	// Capacity bounds the keys kept for a per-key rule.
	Capacity int `json:"capacity,omitempty"`
	// MaxBytes is a per-key rule's byte budget (shed.Rule.MaxBytes):
	// absent means shed.DefaultMaxBytes (64 MiB); a rule whose worst case
	// exceeds it is refused, naming the figures.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Overflow is what a per-key rule does with a new key when its table
	// is full of live ones: "reject" (the default: 503), "share" (one
	// shared bounded state) or, for an ip rule, "prefix" (a bounded limit
	// per network prefix, see Prefix and shed.OverflowPrefix).
	Overflow string `json:"overflow,omitempty"`
	// Prefix is the network prefix limit of "overflow": "prefix" (absent:
	// a /24, a /48, shed.DefaultPrefixFactor).
	Prefix *PrefixSpec `json:"prefix,omitempty"`
	// Count is which finished requests a rate rule's charge stands for:
	// "all" (the default), "failures" (status >= 400), "client_errors"
	// (4xx) or "auth_failures" (401, 403); the others are given back.
	Count string `json:"count,omitempty"`
	// CGNATFactor multiplies an ip rule's limit for addresses in
	// carrier-grade NAT ranges (absent: shed.DefaultCGNATFactor; 1 turns it
	// off); CGNATDefer makes an ip rule step aside for such a client that
	// has a user or an API key.
	CGNATFactor float64 `json:"cgnat_factor,omitempty"`
	CGNATDefer  bool    `json:"cgnat_defer,omitempty"`
	// Calendar places the windows of a fixed or sliding window (absent:
	// UTC, a day from midnight UTC).
	Calendar *CalendarSpec `json:"calendar,omitempty"`
	// Adaptive describes the limiter of an adaptive rule.
	Adaptive *AdaptiveSpec `json:"adaptive,omitempty"`
	// MaxWait and QueueLength let requests wait for a global concurrency
	// or adaptive permit, or for their reserved turn on a token_bucket or
	// a fixed_window of a fixed length, global or per key (at most
	// queue_length waiting; absent: 1024).
	MaxWait     string `json:"max_wait,omitempty"`
	QueueLength int    `json:"queue_length,omitempty"`
	// Queue is the waiting discipline of a global concurrency rule with a
	// max wait.
	Queue *QueueSpec `json:"queue,omitempty"`
	// Failure is "fail_open" (the default) or "fail_closed".
	Failure   string  `json:"failure,omitempty"`
	SoftLimit float64 `json:"soft_limit,omitempty"`
	DryRun    bool    `json:"dry_run,omitempty"`
	// Tier restricts the rule to one declared tier.
	Tier string `json:"tier,omitempty"`
	// Tiers makes the rule one rule per declared tier, named
	// "name/tier": the rule's own limits for the tiers not listed (the
	// default tier's, unless it is listed), these for the listed ones.
	Tiers map[string]TierLimits `json:"tiers,omitempty"`
}

// QueueSpec is a shed.Queue: Order "fifo" (the default), "lifo" or
// "adaptive_lifo"; CoDel and DeadlineAware shed early; Reserve is the share
// of the limit kept for critical work, in [0, 1); FairShare shares the
// limit among the identities it names ("ip", "user", "api_key" or
// "tenant"; absent: none), weighted by shed.Attempt.Weight or by tier
// (tiers.weights). On an adaptive rule with a max_wait, fair_share is the
// only field that applies (its limiter's queue then shares the limit).
type QueueSpec struct {
	Order         string  `json:"order,omitempty"`
	CoDel         bool    `json:"codel,omitempty"`
	DeadlineAware bool    `json:"deadline_aware,omitempty"`
	Reserve       float64 `json:"reserve,omitempty"`
	FairShare     string  `json:"fair_share,omitempty"`
}

// RateSpec is a ratelimit.Rate: Count events per Per.
type RateSpec struct {
	Count int64  `json:"count"`
	Per   string `json:"per"`
}

// AdaptiveSpec is the adaptive.Limiter of an adaptive rule: an algorithm
// ("default", sluice's own adaptive.Default and the one to choose unless
// there is a reason not to, or "aimd", "vegas", "gradient2") and its limit
// range. SchedulingTarget, for "default" only, is the Go scheduling delay
// above which it sheds a share of admissions (adaptive.WithSchedulingTarget,
// a duration such as "10ms"; absent: the algorithm's default), which also
// sets its queue bound (twice the target, a quarter of it under a standing
// overload: a request that waited longer in front of the handler, known
// behind a connguard.Guard, is shed), or "off" to decide from the rule's
// own latency samples alone
// (adaptive.WithoutSchedulingSignal).
type AdaptiveSpec struct {
	Algorithm        string `json:"algorithm"`
	InitialLimit     int    `json:"initial_limit,omitempty"`
	MinLimit         int    `json:"min_limit,omitempty"`
	MaxLimit         int    `json:"max_limit,omitempty"`
	SchedulingTarget string `json:"scheduling_target,omitempty"`
	// fair gives the limiter a fair-share queue: the rule's
	// queue.fair_share, not a field of its own.
	fair bool
}

// PenaltySpec is a penalty.Box and the identity it keys on.
type PenaltySpec struct {
	Identity   string   `json:"identity"`
	Capacity   int      `json:"capacity"`
	Strikes    int      `json:"strikes,omitempty"`
	Window     string   `json:"window,omitempty"`
	Timeouts   []string `json:"timeouts,omitempty"`
	LevelDecay string   `json:"level_decay,omitempty"`
}

// PrefixSpec is a shed.Prefix: the prefix lengths, in bits, by which the
// addresses a full table has no room for are counted, and the factor on
// the rule's limit of one prefix's limit. An absent or zero field is the
// default (shed.DefaultPrefixIPv4, shed.DefaultPrefixIPv6,
// shed.DefaultPrefixFactor).
type PrefixSpec struct {
	IPv4   int     `json:"ipv4,omitempty"`
	IPv6   int     `json:"ipv6,omitempty"`
	Factor float64 `json:"factor,omitempty"`
}
