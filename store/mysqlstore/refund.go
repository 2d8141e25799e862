package mysqlstore

import (
	"context"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
)

// Refund gives back req's hits (store.Refunder) in one statement, a CALL of
// the refund procedure on the database's clock, under row locks taken in
// Decide's order: a token bucket's debt (never fuller than full), a fixed
// window's count while its window is current. What a window no longer
// holds is not given back, and no count goes below zero. res must be the
// admitting result. Errors are Decide's; a lost reply is not retried, so a
// refund whose reply is lost may or may not have been given back, never
// twice.
func (s *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := store.CheckRefund(req, res); err != nil {
		return err
	}
	var lim [store.MaxHits]*sqlquota.Limit
	if err := s.hitLimits(req, &lim); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.queryRetryingDeadlocks(cctx, s.hitsQuery(s.refundSQL, req, &lim)); err != nil {
		return s.failed(ctx, err)
	}
	return nil
}
