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
	return s.fallbacks.Fallback(s, opts)
}

// beat records this instance's heartbeat and counts the live ones, or
// deletes its row (join false), in one statement within the per-call
// deadline: the membership.Beat of s.fallbacks.
func (s *Store) beat(ctx context.Context, memory time.Duration, join bool) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var n int64
	var err error
	if join {
		err = s.pool.QueryRow(cctx, s.beatSQL, s.instance, int64(memory)).Scan(&n)
	} else {
		_, err = s.pool.Exec(cctx, s.leaveSQL, s.instance)
	}
	if err != nil {
		return 0, s.failed(ctx, err)
	}
	return n, nil
}
