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
// per (IP, User, APIKey, Tenant or Global), an Algorithm (token bucket,
// fixed window, sliding window, sliding log, concurrency, adaptive
// concurrency) with its limits, a failure mode for when the store fails, a
// soft limit and a dry-run flag. New builds a Controller from rules.
//
// For each attempt the Controller, in this order:
//
//  1. asks the penalty box (WithPenalties: a penalty.Box) whether the
//     client is serving a timeout, and rejects it at once if so (an
//     over-limit rejection is a strike);
//  2. charges the Global rate rules, in this process;
//  3. takes the Global concurrency and adaptive permits, in this process,
//     waiting up to a rule's MaxWait if it allows waiting;
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
// Dry-run (per rule, or WithDryRun) rejects nothing and counts, logs and
// reports what would have been rejected. Stats snapshots the counters; a
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
package shed
