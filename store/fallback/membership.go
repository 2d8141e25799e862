package fallback

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Membership is the set of instances that share a remote store's limits,
// kept on the remote store itself: a Redis sorted set of heartbeats, a
// table of them in PostgreSQL. A Store beats through it every probe
// interval, to learn N (the number of live instances, among which each
// limit is divided while the remote is down) and, while degraded, to learn
// that the remote answers again.
//
// Implementations must be safe for concurrent use; each call is one round
// trip under the remote store's per-call deadline, returning an error
// matching store.ErrUnavailable when the remote fails and the caller's
// ctx.Err() when ctx ends first. One Membership value is one instance:
// the remote store's constructors of a Store (redisstore.NewFallback,
// pgstore.NewFallback) hand each Store a value of its own, and several
// such values may stand for one process (they count once, and leave when
// the last of them does).
type Membership interface {
	// Beat records that this instance is live, joining the set when it is
	// not in it, and returns how many instances are live: this one and
	// those that beat within memory and did not Leave, on the remote's
	// clock. A remote that cannot count returns 0 (N is then WithInstances'
	// or 1), and its Beat is the probe only.
	Beat(ctx context.Context, memory time.Duration) (int64, error)
	// Leave takes this instance out of the set at once, so that the others'
	// N no longer counts it. A Store calls it once, from Close.
	Leave(ctx context.Context) error
}

// RequestChecker is a remote store with rules of its own for what one
// request may name (Redis Cluster's one hash tag per request): a Store
// asks it before every decision, so that a request the remote would refuse
// is refused while degraded too, with the same error.
type RequestChecker interface {
	// CheckRequest returns the error the remote's Decide would return for
	// req, which has passed Request.Check, for reasons of its shape alone.
	// It does no I/O.
	CheckRequest(req *store.Request) error
}
