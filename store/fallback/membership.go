package fallback

import (
	"context"
	"errors"
	"sync/atomic"
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
// several Stores around one remote in a process count once through a
// Shared, which leaves when the last of them does.
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

// Shared is one instance's Membership shared by every Store around the
// same remote store in this process: each Store that New makes beats
// through it, and the instance Leaves once, when the last of them Closes.
// A remote store keeps one Shared (redisstore, pgstore and mysqlstore do)
// so that their NewFallback may be called more than once. A Shared is safe
// for concurrent use; use NewShared, the zero value is not usable.
type Shared struct {
	members Membership
	open    atomic.Int64 // the Stores made and not closed
}

// NewShared returns the Shared of the instance that members stands for.
func NewShared(members Membership) *Shared { return &Shared{members: members} }

// New returns a Store around remote (see the package's New) that counts as
// this instance. Errors are New's, the instance unchanged.
func (s *Shared) New(remote store.Store, opts ...Option) (*Store, error) {
	if s.members == nil {
		return nil, errors.New("fallback: New needs a remote store and its membership")
	}
	s.open.Add(1)
	f, err := New(remote, sharedMember{s}, opts...)
	if err != nil {
		s.open.Add(-1)
		return nil, err
	}
	return f, nil
}

// sharedMember is one Store's handle on a Shared.
type sharedMember struct{ s *Shared }

func (m sharedMember) Beat(ctx context.Context, memory time.Duration) (int64, error) {
	return m.s.members.Beat(ctx, memory)
}

// Leave leaves when this is the last open Store of the instance.
func (m sharedMember) Leave(ctx context.Context) error {
	if m.s.open.Add(-1) != 0 {
		return nil
	}
	return m.s.members.Leave(ctx)
}
