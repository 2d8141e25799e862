package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/store/fallback"
)

// NewFallback returns a fallback.Store around s: it decides on PostgreSQL
// while the database answers and on this instance's share of each limit,
// locally, while it does not (see package fallback). The instances are
// counted by a heartbeat in the schema's instances table (Migrate creates
// it), one row per instance with its last beat on the database's clock, one
// statement per beat within the per-call deadline; the Fallbacks around
// one Store are one instance, whose row is deleted when the last of them
// Closes. Options are package fallback's; log lines name the backend
// "PostgreSQL". Errors are fallback.New's, and one for a nil s.
func NewFallback(s *Store, opts ...fallback.Option) (*fallback.Store, error) {
	if s == nil {
		return nil, errors.New("pgstore: nil store")
	}
	opts = append([]fallback.Option{fallback.WithBackendName("PostgreSQL")}, opts...)
	return s.fallbacks.New(s, opts...)
}

// members is the Store's instance in the instances table, which its
// Fallbacks share through s.fallbacks.
type members struct{ s *Store }

var _ fallback.Membership = (*members)(nil)

// Beat records this instance's heartbeat and counts the live ones.
func (m *members) Beat(ctx context.Context, memory time.Duration) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, m.s.timeout)
	defer cancel()
	var n int64
	if err := m.s.pool.QueryRow(cctx, m.s.beatSQL, m.s.instance, int64(memory)).Scan(&n); err != nil {
		return 0, m.s.failed(ctx, err)
	}
	return n, nil
}

// Leave deletes this instance's row; s.fallbacks calls it when the last
// Fallback Closes.
func (m *members) Leave(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, m.s.timeout)
	defer cancel()
	if _, err := m.s.pool.Exec(cctx, m.s.leaveSQL, m.s.instance); err != nil {
		return m.s.failed(ctx, err)
	}
	return nil
}
