package store

import "context"

// Store keeps keyed rate, quota and concurrency state. Implementations are
// safe for concurrent use.
//
// Every method takes a context first. An implementation that does I/O
// honours its deadline and cancellation; when the caller's context ends
// first it returns ctx.Err() (the caller gave up), and when the store itself
// fails, including its own per-call deadline, an error matching
// ErrUnavailable. Memory never blocks and ignores ctx.
//
// A network implementation must decide a Request in one round trip with
// one atomic server-side evaluation (for Redis: one script call), on the
// server's clock. One Request may name unrelated keys (an IP and an
// account), so a server that shards keys must place every key a Request
// can name in one shard (on Redis Cluster: one hash tag for the store's
// keys), or it cannot decide them atomically.
type Store interface {
	// Register validates spec and adds it to the store's limits, returning
	// the LimitID that requests use. Names are unique per store. Errors
	// start with "store: ". Registering may run concurrently with Decide.
	Register(ctx context.Context, spec Spec) (LimitID, error)

	// Decide charges every hit of req to its limit, all or nothing, and
	// writes the outcome to res (which it does not retain, nor req). When a
	// hit is rejected, what earlier hits took is given back before Decide
	// returns, and later hits are not evaluated. A rejection is a result,
	// not an error. An error means nothing was charged and res is
	// meaningless: bad input (an unknown limit, matching ErrUnknownLimit;
	// a negative cost; a malformed req) or, for a network store,
	// ErrUnavailable.
	Decide(ctx context.Context, req *Request, res *Result) error

	// Release gives a lease's permits back at now (Memory's clock; a
	// network store uses its own). It returns ErrLeaseNotHeld when the
	// lease is not held: the zero Lease, released already, or expired (a
	// lease is held until its Expires, exclusive), so the permits come back
	// exactly once on every path. A lease of an unknown limit is an error
	// matching ErrUnknownLimit.
	Release(ctx context.Context, lease Lease, now int64) error

	// Unregister drops limit id: it stops existing, and its state may be
	// freed. Afterwards Decide naming id and Release of its leases return
	// an error matching ErrUnknownLimit, and so does Unregister of id
	// again, or of an id the store never handed out. IDs are never
	// reused; the limit's name is free to be registered again, under a
	// new id. Unregister may run concurrently with Decide and Release: a
	// Decide racing with it either decides on the limit as it was or
	// fails with ErrUnknownLimit. Errors start with "store: ".
	Unregister(ctx context.Context, id LimitID) error
}
