package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

var (
	_ store.Resetter = (*Store)(nil)
	_ store.Refunder = (*Store)(nil)
)

// Reset forgets key of limit id in Redis (store.Resetter): its state keys
// are deleted in one call, so every Store of the prefix sees the key fresh.
// It returns an error matching store.ErrUnknownLimit for an id not
// registered here, the caller's ctx.Err() when ctx ends first, and an
// error matching store.ErrUnavailable when Redis fails.
func (s *Store) Reset(ctx context.Context, id store.LimitID, key string) error {
	l := s.lookup(id)
	if l == nil {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	k, m := s.keys(l, key)
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Del(cctx, k, m).Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return store.Unavailable(err)
	}
	return nil
}

// Refund gives back req's hits in Redis (store.Refunder), in one script
// call: a window's count in the window that counted it, the one of res.Now
// (the server's TIME at the admitting decision), while the key's state
// still holds that window (a sliding window's as its previous count too),
// never a later window's; a fixed window's reservation still pending is
// cancelled; a bucket's debt is given back as of the server's clock now,
// only what the hit's tokens still weigh then (they were paid off at
// res.Now plus the hit's ResetAfter), and a sliding log's entries made at res.Now or before that still count
// (the latest of them), never an admission made since; concurrency hits
// are left to their leases. res must be the admitting
// result (Redis needs it for its instant and its reservations; no key
// there counts on a shared overflow state). Errors are Decide's; a lost
// reply is not retried.
func (s *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := store.CheckRefund(req, res); err != nil {
		return err
	}
	var lim [store.MaxHits]*limit
	keys, args, err := s.scriptArgs(req, -req.N, res, &lim)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, &s.decide, keys, args)
	return err
}
