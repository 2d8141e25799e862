package mysqlstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
)

// NewFallback returns a fallback.Store around s: it decides on MariaDB
// while MariaDB answers and on a local share of each limit when it does
// not (see package fallback). Its instances are counted by a heartbeat in
// the table prefix_members (Migrate creates it), on the database's clock;
// the Fallbacks around one Store are one instance there, which leaves when
// the last of them Closes. Options are package fallback's
// (fallback.WithTripAfter, ...); log lines name the backend "MariaDB".
// Errors are fallback.New's, and one for a nil s.
func NewFallback(s *Store, opts ...fallback.Option) (*fallback.Store, error) {
	if s == nil {
		return nil, errors.New("mysqlstore: nil store")
	}
	return s.fallbacks.Fallback(s, opts)
}

// beat calls the beat procedure within the per-call deadline: the
// membership.Beat of s.fallbacks.
func (s *Store) beat(ctx context.Context, memory time.Duration, join bool) (int64, error) {
	q := s.set + "CALL " + object(s.prefix, "beat") + "('" + s.instance + "', " +
		strconv.FormatInt(int64(memory), 10) + ", " + strconv.FormatBool(join) + ")"
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := s.queryString(cctx, q)
	if err != nil {
		return 0, s.failed(ctx, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, store.Unavailable(errReply)
	}
	return n, nil
}
