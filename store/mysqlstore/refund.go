package mysqlstore

import (
	"context"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
)

// Refund gives back req's hits (store.Refunder) in one statement, a CALL of
// the refund procedure, under row locks taken in Decide's order: of a
// token bucket's debt, only the part the admission still owes at the
// database's clock now (the bucket was paid off at res.Now plus the hit's
// ResetAfter; what it has refilled since is not given back again; never
// fuller than full), and a fixed window's count in the window that counted
// it, the one of res.Now (the database's clock at the admitting decision),
// while the key's row still holds that window, never a later window's. No
// count goes below zero. res must be the admitting result. Errors are
// Decide's; a lost reply is not retried, so a refund whose reply is lost
// may or may not have been given back, never twice.
func (s *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := store.CheckRefund(req, res); err != nil {
		return err
	}
	var lim [store.MaxHits]*sqlquota.Limit
	if err := s.limits.Hits(req, &lim); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.queryRetryingDeadlocks(cctx, s.hitsQuery(s.refundSQL, req, &lim, res)); err != nil {
		return s.failed(ctx, err)
	}
	return nil
}
