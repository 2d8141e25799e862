package pgstore

import (
	"context"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
)

// Usage reads key's use of limit id, as Decide would report it for a cost
// of 0: one round trip within the per-call deadline, nothing charged or
// written, and no lock taken, so it never waits on a decision of the key
// (nor delays one). It returns an error matching store.ErrUnknownLimit for an id
// not registered here, the caller's ctx.Err() when ctx ends first, and an
// error matching store.ErrUnavailable when the database fails.
func (s *Store) Usage(ctx context.Context, id store.LimitID, key string) (store.Usage, error) {
	return sqlquota.Usage(ctx, s, &s.limits, id, key)
}

// Reset forgets key of limit id (store.Resetter): its row is deleted in one
// statement within the per-call deadline, so every Store of the schema
// sees the key fresh; the pardon of a client, or its quota given back. A
// decision racing with it is counted before or after it. It returns an
// error matching store.ErrUnknownLimit for an id not registered here, the
// caller's ctx.Err() when ctx ends first, and an error matching
// store.ErrUnavailable when the database fails.
func (s *Store) Reset(ctx context.Context, id store.LimitID, key string) error {
	l, err := s.limits.Known(id)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.pool.Exec(cctx, s.resetSQL, l.Spec.Name, l.Kind, []byte(key)); err != nil {
		return s.failed(ctx, err)
	}
	return nil
}

// Cleanup deletes at most limit expired rows (states indistinguishable from
// none: a full bucket, a window that has passed) of every limit of the
// schema, and returns how many it deleted. It skips rows that a decision
// holds locked (FOR UPDATE SKIP LOCKED), so it never waits on a hot key nor
// makes one wait, and a bounded batch keeps each transaction short. Call it
// from a ticker (every minute, say) on one or more instances, until it
// deletes fewer than limit. It runs under ctx alone, not the per-call
// deadline. It returns an error for a limit that is not positive, the
// caller's ctx.Err() when ctx ends, and an error matching
// store.ErrUnavailable when the database fails.
func (s *Store) Cleanup(ctx context.Context, limit int) (int64, error) {
	if err := s.limits.CheckCleanup(limit); err != nil {
		return 0, err
	}
	var n int64
	if err := s.pool.QueryRow(ctx, s.cleanupSQL, int32(limit)).Scan(&n); err != nil {
		return 0, s.failed(ctx, err)
	}
	return n, nil
}

// SchemaName returns the name of the store's schema (unquoted), as
// WithSchema set it.
func (s *Store) SchemaName() string { return s.name }
