package memcachestore

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
)

// NewFallback returns a fallback.Store around s: it decides on Memcached
// while Memcached answers and on a local share of each limit when it does
// not (see package fallback). Memcached cannot count the live instances
// (no sorted sets, no scripting), so its heartbeat is a probe only (a
// ping of every server): pass fallback.WithInstances(n) for the share, or
// each instance falls back to the whole limit. Options are package
// fallback's; log lines name the backend "Memcached". Errors are
// fallback.New's, and one for a nil s.
func NewFallback(s *Store, opts ...fallback.Option) (*fallback.Store, error) {
	if s == nil {
		return nil, errors.New("memcachestore: nil store")
	}
	opts = append([]fallback.Option{fallback.WithBackendName("Memcached")}, opts...)
	return fallback.New(s, probe{s}, opts...)
}

// probe is the Membership of a Memcached store: a ping, counting nothing.
type probe struct{ s *Store }

var _ fallback.Membership = probe{}

// Beat pings every server and counts nothing (0).
func (p probe) Beat(ctx context.Context, _ time.Duration) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := p.s.client.Ping(); err != nil {
		return 0, store.Unavailable(err)
	}
	return 0, nil
}

// Leave does nothing: no instance was counted.
func (probe) Leave(context.Context) error { return nil }
