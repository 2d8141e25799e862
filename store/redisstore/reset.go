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
// call on the server's clock: a window's count while the window holds it,
// a bucket's debt, a sliding log's latest admissions still in its window;
// concurrency hits are left to their leases. res is not needed on Redis
// (no key there counts on a shared overflow state) but must be the
// admitting result. Errors are Decide's; a lost reply is not retried.
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
