package mysqlstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Usage is one key's use of one limit at one instant, read without
// charging: for billing and for a status page.
type Usage struct {
	// Limit is the limit's Limit.
	Limit int64
	// Used is what the key has taken: the units counted in the current
	// window of a fixed window (at most Limit), the tokens a token bucket
	// owes, rounded up. Remaining is Limit − Used.
	Used, Remaining int64
	// Start and End bound the current window of a fixed window on the
	// database's clock (End exclusive; a calendar month's are its first
	// instant and the next month's); both are zero for a token bucket.
	Start, End time.Time
	// ResetAfter is how long until the key has its whole limit again (the
	// window ends, the bucket is full); zero when it has it now.
	ResetAfter time.Duration
	// Now is the instant of the reading on the database's clock.
	Now time.Time
}

// Usage reads key's use of limit id, as Decide would report it for a cost
// of 0: one round trip within the per-call deadline, nothing charged or
// written, and no lock taken, so it never waits on a decision of the key
// (nor delays one). It returns an error matching store.ErrUnknownLimit for
// an id not registered here, the caller's ctx.Err() when ctx ends first,
// and an error matching store.ErrUnavailable when the database fails.
func (s *Store) Usage(ctx context.Context, id store.LimitID, key string) (Usage, error) {
	l := s.limits.Lookup(id)
	if l == nil {
		return Usage{}, fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	var req store.Request
	req.Add(id, key, 0)
	var res store.Result
	if err := s.Decide(ctx, &req, &res); err != nil {
		return Usage{}, err
	}
	d := res.Hits[0].Decision
	u := Usage{
		Limit:      d.Limit,
		Used:       d.Limit - d.Remaining,
		Remaining:  d.Remaining,
		ResetAfter: d.ResetAfter,
		Now:        time.Unix(0, res.Now).UTC(),
	}
	if l.spec.Algorithm == store.FixedWindow && res.Now >= 0 {
		at, span := l.clock.At(res.Now), l.param
		idx := at / span
		u.Start = time.Unix(0, l.clock.Real(idx*span)).UTC()
		u.End = time.Unix(0, l.clock.Real((idx+1)*span)).UTC()
	}
	return u, nil
}

// Reset forgets key of limit id (store.Resetter): its row is deleted in one
// statement within the per-call deadline, so every Store of the prefix
// sees the key fresh; the pardon of a client, or its quota given back. A
// decision racing with it is counted before or after it (the delete waits
// for the row's lock). It returns an error matching store.ErrUnknownLimit
// for an id not registered here, the caller's ctx.Err() when ctx ends
// first, and an error matching store.ErrUnavailable when the database
// fails.
func (s *Store) Reset(ctx context.Context, id store.LimitID, key string) error {
	l := s.limits.Lookup(id)
	if l == nil {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	// Hex literals: any bytes, no quoting.
	q := s.set + "DELETE FROM " + s.stateTable + " WHERE name = X'" + l.name +
		"' AND kind = " + strconv.Itoa(int(l.kind)) + " AND k = X'" + hex.EncodeToString([]byte(key)) + "'"
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.db.ExecContext(cctx, q); err != nil {
		return s.failed(ctx, err)
	}
	return nil
}

// Cleanup deletes at most limit expired rows (states indistinguishable from
// none: a full bucket, a window that has passed) of every limit of the
// prefix, and returns how many it deleted. It skips rows that a decision
// holds locked (FOR UPDATE SKIP LOCKED), so it never waits on a hot key nor
// makes one wait, and a bounded batch keeps its transaction short. Call it
// from a ticker (every minute, say) on one or more instances, until it
// deletes fewer than limit. It runs under ctx alone, not the per-call
// deadline. It returns an error for a limit outside 1..2^31-1, the caller's
// ctx.Err() when ctx ends, and an error matching store.ErrUnavailable when
// the database fails.
func (s *Store) Cleanup(ctx context.Context, limit int) (int64, error) {
	if limit <= 0 || limit > 1<<31-1 {
		return 0, fmt.Errorf("mysqlstore: cleanup limit must be from 1 to 2^31-1, got %d", limit)
	}
	v, err := s.queryString(ctx, s.cleanupSQL+strconv.Itoa(limit)+")")
	if err != nil {
		return 0, s.failed(ctx, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, store.Unavailable(fmt.Errorf("mysqlstore: malformed reply of cleanup: %q", v))
	}
	return n, nil
}
