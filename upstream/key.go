package upstream

import (
	"sync"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/ratelimit"
)

// keyState is the state a Transport keeps per upstream key, in a
// concurrency.Table. Its zero value is the fresh state. Every field but the
// bucket is guarded by mu; the table's Reset runs only while it holds the
// entry exclusively.
type keyState struct {
	mu sync.Mutex

	bucket ratelimit.GCRAState // token-bucket mode
	// reservation numbers the bucket's reservations, so that only the
	// latest one is ever refunded; reserved is that one.
	reservation uint64
	reserved    ratelimit.Reservation
	pacer       *queueing.Pacer // pacer mode, made on first use
	lastSlot    int64           // latest slot the pacer handed out

	// blockedUntil is when a Retry-After (or a 429/503 without one) stops
	// blocking the key; epoch counts such blocks, so that a waiter whose
	// turn was computed before one notices it.
	blockedUntil int64
	epoch        uint64

	// quotas are the upstream's own counts, from its response headers.
	quotas [maxQuotas]quotaState

	// sent numbers the requests dispatched to the upstream; answered
	// counts those whose answer (or failure) came back, in any order.
	sent, answered uint64

	throttle throttleWindow

	sem    *concurrency.Semaphore // concurrency cap, made on first use
	places *queueing.Queue        // sem's waiters
}

// quotaState is one quota the upstream reported: left requests
// may still be sent before resetAt; from resetAt on it no longer applies.
type quotaState struct {
	active  bool
	name    string
	left    int64
	resetAt int64
	seq     uint64 // the dispatch number of the request whose response set it
}

// Reset makes k the fresh state again (concurrency.Table calls it when it
// recycles an entry).
func (k *keyState) Reset() {
	k.bucket.Reset()
	k.reservation, k.reserved = 0, ratelimit.Reservation{}
	k.pacer, k.lastSlot = nil, 0
	k.blockedUntil, k.epoch = 0, 0
	k.quotas = [maxQuotas]quotaState{}
	k.sent, k.answered = 0, 0
	k.throttle = throttleWindow{}
	k.sem, k.places = nil, nil
}

// earliestLocked returns the first instant at or after now at which the
// key may send: after any block, and after the reset of any quota the
// upstream reported exhausted. Quotas that ended are dropped.
func (k *keyState) earliestLocked(now int64) int64 {
	at := max(now, k.blockedUntil)
	for i := range k.quotas {
		q := &k.quotas[i]
		if !q.active {
			continue
		}
		if q.resetAt <= now {
			*q = quotaState{}
			continue
		}
		if q.left <= 0 {
			at = max(at, q.resetAt)
		}
	}
	return at
}

// dispatch identifies a request sent to the upstream: its number, and how
// many requests sent before it were still unanswered then (the upstream
// may count those after it: its report on this one may miss them).
type dispatch struct {
	seq, ahead uint64
}

// chargeLocked counts one request sent at now against the quotas the
// upstream reported, and returns its dispatch.
func (k *keyState) chargeLocked(now int64) dispatch {
	for i := range k.quotas {
		if q := &k.quotas[i]; q.active && q.resetAt > now {
			q.left--
		}
	}
	d := dispatch{seq: k.sent + 1, ahead: k.sent - k.answered}
	k.sent++
	return d
}

// recovered reports whether k is indistinguishable from a fresh state at
// now, for a Transport whose pacer spaces slots spacing apart (or whose
// bucket is g). The table calls it only while no request holds the entry,
// so no request is waiting or in flight.
func (k *keyState) recovered(now int64, g *ratelimit.GCRA, spacing int64) bool {
	if k.blockedUntil > now || (k.pacer != nil && k.lastSlot+spacing > now) || !k.throttle.empty(now) {
		return false
	}
	if g != nil && !g.Recovered(&k.bucket, now) {
		return false
	}
	for i := range k.quotas {
		if k.quotas[i].active && k.quotas[i].resetAt > now {
			return false
		}
	}
	return true
}
