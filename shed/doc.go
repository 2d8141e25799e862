// Package shed is sluice's server side: it composes sluice's parts into
// what a service puts in front of its endpoints: rules that decide
// admission per endpoint category and client identity, and net/http
// middleware that answers with correct status codes (429 for a client over
// its limit, 503 when the server sheds load for its own protection),
// Retry-After, X-RateLimit-* and the IETF RateLimit and RateLimit-Policy
// header fields. The client side, calls to services that limit you
// (pacing, honouring Retry-After and quota headers, SRE throttling, retry
// budgets), is package upstream.
//
// A Rule names a category of endpoints ("" for all), an Identity to count
// per (IP, User, APIKey, Tenant, a Composite Key of identities and request
// attributes such as tenant + model or IP + route, or Global), an
// Algorithm (token bucket, fixed window, sliding window, sliding log,
// concurrency, adaptive concurrency) with its limits, a failure mode for
// when the store fails, a soft limit and a dry-run flag. New builds a
// Controller from rules.
//
// Keys cannot be dodged: the default category is the method class in any
// case (HEAD is a read like GET; every method but GET, HEAD and OPTIONS is
// a write), a route in a key is the router's pattern or the normalised
// path (/login, /Login/, //login and /%6cogin are one), values are bounded
// before they reach a store key (long ones, API keys and headers hashed),
// and a header a client leaves out counts on the empty value. Memory is
// bounded in bytes, not only in keys: each per-key rule has a byte budget
// (Rule.MaxBytes, DefaultMaxBytes), and New refuses a rule whose worst
// case, every key of its capacity live and grown at once, exceeds it.
//
// For each attempt the Controller, in this order:
//
//  1. asks the penalty box (WithPenalties: a penalty.Box) whether the
//     client is serving a timeout, and rejects it at once if so (an
//     over-limit rejection is a strike);
//  2. charges the Global rate rules, in this process (a Global FixedWindow
//     rule with a limit up to 2^31-1 on a ratelimit.ShardedWindow, a
//     Global TokenBucket rule with a burst of 128 and more on a
//     ratelimit.ShardedBucket, so that parallel requests do not all write
//     one word: exact like the single word, with a Remaining that is a
//     lower bound; sliding windows and logs decide on one word);
//  3. takes the Global concurrency and adaptive permits, in this process,
//     waiting up to a rule's MaxWait if it allows waiting (a Global
//     Concurrency rule without MaxWait whose limit reaches 8 permits a
//     shard of the default count, 64 at GOMAXPROCS 2, decides on a
//     concurrency.ShardedSemaphore, exact like the single word; with
//     MaxWait, below that limit, or at GOMAXPROCS 1, on one word);
//  4. decides every per-key rule in one store call (store.Store; a Memory
//     store by default), all or nothing.
//
// A token-bucket or fixed-window rule with MaxWait (short waits for calls
// between internal services, which would rather be slowed than fail)
// reserves, instead of rejecting, the exact slot at which a request fits
// if it comes within MaxWait and before the request's deadline; the
// attempt then waits for the latest slot of its rules (in Decide and the
// middleware, on the request's context, which cancels the reservations if
// it ends first), and takes its concurrency permits after the wait, so
// that a waiter holds none. Concurrent waiters get consecutive slots, none
// early (50 waiters on a bucket of 10 a second start 100 ms apart), and
// the attempt's other token-bucket and fixed-window rules are charged at
// its slot too.
// Rule.QueueLength bounds the waiters; RuleStats counts the waits.
//
// When a later step rejects, what the earlier ones took is given back, so
// layered limits (20 per 15 minutes per IP AND 5 per 15 minutes per
// account) count only what they admit. Controller.Decide is the API for any
// kind of work; Controller.Middleware wraps an http.Handler. An admitted
// attempt holds a Token whose Done reports the outcome to adaptive limits
// and returns every permit exactly once.
//
// Controller.Peek reads an attempt's rules without deciding (at cost 0:
// nothing charged, no permit, no strike, no decision counted), so that a
// handler can show a client its quota or a job runner ask before it
// tries; PeekRequest reads a request as the middleware does, and
// Decision.WriteHeaders writes the header fields of the reading.
//
// Dry-run (per rule, or WithDryRun) rejects nothing and counts, logs and
// reports what would have been rejected; for suspicion tightening
// (Suspicion.DryRun, or WithDryRun) it counts what the tightened limits
// would have rejected (Stats.TightenedWouldReject). WithSuspicion can
// also demote a suspicious client to a lower Priority, which Global
// Concurrency queues and Adaptive limiters serve last. Stats snapshots the counters; a
// decision hook (WithDecisionHook) sees every decision. Log lines go
// through log/slog, at most one per kind per second. Errors start with
// "shed: ".
//
// Limits can depend on who the client is: a rule with a Tier applies only
// to attempts of that tier (Attempt.Tier, Client.Tier: a plan, a client
// type), and an attempt whose tier no rule names is decided as the default
// tier (WithDefaultTier), never as unlimited. SetOverrides scales one
// client's limit of a per-key rule until an expiry. Reload replaces the
// rules, overrides and categorizer of a running Controller atomically,
// keeping the state of unchanged rules. WithEarlyWarning reports keys that
// use half their limit in the first fifth of a window. HotKeys lists each
// per-key rule's most used keys and Penalized the clients serving a
// timeout, both by hashed key and read when asked (nothing is kept per
// decision); ResetHash and PardonHash act on those keys. The policy
// package reads all of this from files.
//
// A Global Concurrency or Adaptive rule's waiters are served by
// Attempt.Priority (Queue: order, CoDel, deadlines, a reserve for critical
// work), and Queue.FairShare shares its limit among tenants (or users, API
// keys, addresses) by Attempt.Weight, work-conserving: a noisy tenant
// borrows only what the others leave idle, and gives it back as its
// permits free up.
//
// Every per-key table is bounded (Rule.Capacity) and evicts only keys
// indistinguishable from fresh ones, so under a key flood a new key may
// find no room. That is the server's condition, never the client's: the
// rule's Overflow answers it with a 503 and a short Retry-After
// (OverflowReject), one bounded state shared by such keys (OverflowShare)
// or, for an IP rule, a bounded limit per network prefix (OverflowPrefix: a
// /24 or a /48 at Prefix.Factor times the limit), which keeps newcomers of
// other networks served while a flood from one network holds the table.
// None is a 429 or a penalty strike; all are counted (RuleStats.Overflowed,
// RuleStats.OverflowPrefix) and logged once a second. OverflowPrefix is not
// the default: it admits up to a prefix's allowance more per window for
// addresses of a flooding network, and keeps a second table per rule.
package shed
