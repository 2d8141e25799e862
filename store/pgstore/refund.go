package pgstore

import (
	"context"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
)

var _ store.Refunder = (*Store)(nil)

// Refund gives back req's hits (store.Refunder) in one statement, a call of
// the schema's refund function on the database's clock, under the locks
// and in the order of Decide: a token bucket's debt (never fuller than
// full), a fixed window's count while its window is current, a sliding
// window's latest count while that window still counts. What a window no
// longer holds is not given back, and no count goes below zero. res is not
// needed here (no key counts on a shared overflow state) but must be the
// admitting result. Errors are Decide's; a lost reply is not retried, so a
// refund whose reply is lost may or may not have been given back, never
// twice.
func (s *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := store.CheckRefund(req, res); err != nil {
		return err
	}
	var lim [store.MaxHits]*sqlquota.Limit
	args, err := s.args(req, &lim)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(cctx, s.refundSQL, args...).Scan(&n); err != nil {
		return s.failed(ctx, err)
	}
	return nil
}
