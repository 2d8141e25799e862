package pgstore

import (
	"context"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
)

var _ store.Refunder = (*Store)(nil)

// Refund gives back req's hits (store.Refunder) in one statement, a call of
// the schema's refund function, under the locks and in the order of
// Decide: of a token bucket's debt, only the part the admission still owes
// at the database's clock now (the bucket was paid off at res.Now plus the
// hit's ResetAfter; what it has refilled since is not given back again;
// never fuller than full), and a window's count in the window that counted
// it, the one of res.Now (the database's clock at the admitting decision),
// while the key's row still holds that window (a sliding window's as its
// previous count too), never a later window's. No count goes below zero.
// res must be the admitting result (no key here counts on a shared
// overflow state). Errors are Decide's; a lost reply is not retried, so a
// refund whose reply is lost may or may not have been given back, never
// twice.
func (s *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := store.CheckRefund(req, res); err != nil {
		return err
	}
	// Its SQL function decides at once; a reservation would need the slot
	// and the state it left in the reply, which it has no room for yet.
	if err := store.RefuseReserve(req, "pgstore"); err != nil {
		return err
	}
	var lim [store.MaxHits]*sqlquota.Limit
	if err := s.limits.Hits(req, &lim); err != nil {
		return err
	}
	args := s.args(req, &lim)
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	untils := make([]int64, req.N)
	for i := range untils {
		untils[i] = sqlquota.PaidOff(res, i)
	}
	var n int64
	// The windows are the admission's; a bucket gives back only what the
	// admission still owes.
	args = append(args, res.Now, untils)
	if err := s.pool.QueryRow(cctx, s.refundSQL, args...).Scan(&n); err != nil {
		return s.failed(ctx, err)
	}
	return nil
}
