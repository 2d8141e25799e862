package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// MaxHits is the most limits one Request can name.
const MaxHits = 8

// LimitID identifies a limit registered with a Store; it is meaningful only
// to the store that returned it. Stores number limits from 1, so the zero
// LimitID is never registered.
type LimitID uint32

// Hit is one limit applied to one request: Cost units of limit Limit charged
// to Key.
type Hit struct {
	// Limit is the registered limit.
	Limit LimitID
	// Key is the identity the limit counts for (an IP, a user, a tenant;
	// "" is a valid key, for a global limit). It must already be hashed by
	// the caller when it derives from a secret: a network store writes it
	// into its key names (Memory keeps only a keyed 64-bit hash of it, and
	// a Lease carries it back to the caller).
	Key string
	// Cost is how many units the request takes: tokens, window admissions
	// or permits. Zero charges nothing and reports the state (no lease);
	// negative is an error. A cost above the limit is rejected with
	// ratelimit.ReasonExceedsCapacity.
	Cost int64
	// MaxWait lets a hit that does not fit now reserve the exact instant
	// at which it fits, if that comes within MaxWait: the limit is charged
	// now as if the hit were admitted then (ratelimit.GCRA.ReserveN, and
	// FixedWindow.ReserveN: the start of a later window), and
	// HitResult.Wait says how long the caller must wait before the work
	// starts. Only TokenBucket limits and FixedWindow limits of a fixed
	// length (no calendar months) reserve (CheckReserve). A hit decided
	// after one that reserved asks for no earlier instant (all hits of a
	// request start together, at Result.Wait), and one that can reserve is
	// charged exactly then when its MaxWait is shorter (or zero); a hit
	// decided before one that reserved later keeps its earlier instant.
	// Zero means no waiting; it must not be negative nor above
	// ratelimit.MaxReserveWait, and a store returns an error for a
	// MaxWait on a limit that cannot reserve, or one it cannot honour.
	MaxWait time.Duration
}

// RefuseReserve is what a store that decides at once only (it cannot
// reserve) returns for req: an error naming the store and matching
// errors.ErrUnsupported when a hit has a MaxWait, nil otherwise (such a
// store decides every hit at Now, whatever Request.Wait says). Callers
// that may wait (package shed) then decide again without the max waits.
func RefuseReserve(req *Request, storeName string) error {
	for i := range req.Hits[:min(max(req.N, 0), MaxHits)] {
		if mw := req.Hits[i].MaxWait; mw > 0 {
			return fmt.Errorf("store: %s cannot reserve (hit %d has a max wait of %v): %w",
				storeName, i, mw, errors.ErrUnsupported)
		}
	}
	return nil
}

// CheckReserve reports whether a hit on the limit of spec may carry a
// MaxWait: a TokenBucket, or a FixedWindow of a fixed length (a window of
// calendar months has no fixed start to reserve at on every store alike).
// The error starts with "store: ".
func CheckReserve(spec Spec) error {
	switch {
	case spec.Algorithm == TokenBucket:
	case spec.Algorithm == FixedWindow && spec.Calendar.Months == 0:
	case spec.Algorithm == FixedWindow:
		return fmt.Errorf("store: limit %q: a max wait does not apply to windows of calendar months", spec.Name)
	default:
		return fmt.Errorf("store: limit %q: a max wait applies only to %v and %v limits, not %v",
			spec.Name, TokenBucket, FixedWindow, spec.Algorithm)
	}
	return nil
}

// Request is the set of limits one request must pass, decided together by
// Store.Decide. Build it with Add, or fill Hits[:N] directly. It is a plain
// value meant to be reused (for example inside a pooled per-request object)
// so that deciding allocates nothing; Reset empties it for the next one.
type Request struct {
	// Now is the time of the decision in nanoseconds on a monotonic clock,
	// read once per request by the caller (the same now the concurrency
	// package's decision methods take); it must not be negative. Memory
	// decides at Now. A network store ignores it and uses its server's
	// clock, so that instances with different clocks share one timeline.
	Now int64
	// Hits are the limits, Hits[:N], decided in this order.
	Hits [MaxHits]Hit
	// N is the number of hits; a value outside 1..MaxHits makes Decide fail.
	N int
	// Wait is how long after Now the request will start anyway (a slot
	// reserved on a limit outside this store): every hit that can reserve
	// (CheckReserve) is charged no earlier, within its MaxWait, or exactly
	// at Now+Wait when its MaxWait is shorter, so that no limit sees the
	// request start after its charge; the others are decided at Now.
	// Zero for none; it must not be negative nor above
	// ratelimit.MaxReserveWait.
	Wait time.Duration
}

// Reset makes r the empty request Request{Now: now}, ready for Add: it
// clears N, Wait and the hits r held (Hits[:N]) rather than all MaxHits of
// them, so that a reused Request costs a few words per decision (and, while
// the garbage collector marks, a write barrier only for the keys it held).
// It is not safe for concurrent use with other uses of r.
func (r *Request) Reset(now int64) {
	n := min(r.N, MaxHits)
	for i := 0; i < n; i++ { // none for a negative N
		h := &r.Hits[i]
		if h.Key != "" {
			h.Key = ""
		}
		h.Limit, h.Cost, h.MaxWait = 0, 0, 0
	}
	r.Now, r.N, r.Wait = now, 0, 0
}

// Add appends a hit. Adding more than MaxHits hits is not a panic: N grows
// past MaxHits and Decide returns an error.
func (r *Request) Add(limit LimitID, key string, cost int64) {
	if r.N >= 0 && r.N < MaxHits {
		// Field by field: a Hit literal stored whole passes the whole
		// hit through the write barrier (runtime.wbZero) while the GC
		// marks; this way only the key does.
		h := &r.Hits[r.N]
		h.Limit, h.Key, h.Cost, h.MaxWait = limit, key, cost, 0
	}
	r.N++
}

// Check reports whether r is well-formed whatever the store: N within
// 1..MaxHits, every hit naming a limit (not the zero LimitID) with a cost
// that is not negative. Stores call it before charging anything; whether
// each limit is registered is for the store to check.
func (r *Request) Check() error {
	if r.N < 1 || r.N > MaxHits {
		return fmt.Errorf("store: a request needs 1 to %d hits, got %d", MaxHits, r.N)
	}
	if r.Wait < 0 || r.Wait > ratelimit.MaxReserveWait {
		return fmt.Errorf("store: a request wait of %v outside [0, %v]", r.Wait, ratelimit.MaxReserveWait)
	}
	for i := range r.Hits[:r.N] {
		h := &r.Hits[i]
		if h.Limit == 0 {
			return fmt.Errorf("store: hit %d names no limit", i)
		}
		if h.Cost < 0 {
			return fmt.Errorf("store: hit %d has a negative cost %d", i, h.Cost)
		}
		if h.MaxWait < 0 || h.MaxWait > ratelimit.MaxReserveWait {
			return fmt.Errorf("store: hit %d has a max wait %v outside [0, %v]", i, h.MaxWait, ratelimit.MaxReserveWait)
		}
	}
	return nil
}

// Lease is a held concurrency permit: Cost permits of limit Limit for Key,
// until Release or until Expires, whichever comes first. It is a plain
// value; keep it to release it.
type Lease struct {
	// Limit and Key name the state the permits were taken from.
	Limit LimitID
	Key   string
	// ID identifies the lease within that state; it is never 0 for a held
	// lease. Its layout belongs to the store. (Memory numbers the leases of
	// one key's state in sequence from a random start, so a stale lease
	// matches a later one of the same key only by a chance of about 2^-39
	// after the state was evicted and made anew.)
	ID uint64
	// Cost is the number of permits held.
	Cost int64
	// Expires is the instant, on the store's clock (Result.Now's), at which
	// the lease lapses and its permits return by themselves.
	Expires int64
}

// Held reports whether l is a lease (the zero Lease is not).
func (l Lease) Held() bool { return l.ID != 0 }

// HitResult is the outcome of one hit.
type HitResult struct {
	// Decision is the limit's decision for the hit. For hits charged and
	// then undone because a later hit rejected, it is the decision as it was
	// made (Allowed), although nothing stays charged.
	Decision ratelimit.Decision
	// Lease is the lease taken by an admitted Concurrency hit with a
	// positive cost (Held), and the zero Lease otherwise, including when
	// the request as a whole was rejected.
	Lease Lease
	// Overflow reports that the key did not fit the store's table of keys
	// for this limit: it was counted on the limit's shared overflow state
	// (concurrency.OverflowShare), or rejected outright
	// (concurrency.OverflowReject; RetryAfter is then a hint, the longest an
	// untouched key takes to recover). A network store never sets it.
	Overflow bool
	// Wait is how long after Result.Now the hit's admission holds: the
	// slot a hit with MaxWait reserved; zero for an admission at once.
	// Reserved is the state the reservation left
	// (ratelimit.Reservation.End, in the store's own units), kept so that
	// Refund cancels exactly this reservation; zero when Wait is.
	Wait     time.Duration
	Reserved int64
}

// forget zeroes r for a store's next decision of its hit, but for its
// Decision, which every decision writes. Assigning a whole HitResult{}
// would pass the lease's key through the write barrier while the GC
// marks, set or not: it is cleared only when a lease was held.
func (r *HitResult) forget() {
	if r.Lease.Key != "" {
		r.Lease.Key = ""
	}
	r.Lease.Limit, r.Lease.ID, r.Lease.Cost, r.Lease.Expires = 0, 0, 0, 0
	r.Overflow, r.Wait, r.Reserved = false, 0, 0
}

// Result is the outcome of a Request.
type Result struct {
	// Allowed reports whether every hit was admitted; only then is anything
	// charged.
	Allowed bool
	// Decider is the index of the hit that decided: the first one that
	// rejected, or, when Allowed, the one with the fewest Remaining (the
	// first of those on a tie), whose decision a response would report.
	// A rejection's RetryAfter is the decider's own: hits after it were not
	// evaluated, and one of them may still reject the retry.
	Decider int
	// N is the number of hits evaluated, Hits[:N]. Stores stop at the first
	// rejection, so N is Decider+1 when the request is rejected and the
	// request's N when it is allowed.
	N int
	// Now is the instant of the decision on the store's clock: Request.Now
	// for Memory, the server's time for a network store. Lease expiries
	// are on this clock.
	Now int64
	// Wait is the longest Wait of the hits: an admitted request must not
	// start before Now+Wait. Whoever gives up before then gives the
	// reservations back with Refunder.Refund.
	Wait time.Duration
	// Hits are the per-hit outcomes, Hits[:N].
	Hits [MaxHits]HitResult
}

// Decision returns the deciding hit's decision.
func (r *Result) Decision() ratelimit.Decision { return r.Hits[r.Decider].Decision }
