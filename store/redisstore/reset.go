package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

var (
	_ store.Resetter = (*Store)(nil)
	_ store.Resetter = (*Fallback)(nil)
	_ store.Refunder = (*Store)(nil)
	_ store.Refunder = (*Fallback)(nil)
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

// Reset forgets key of limit id in Redis and in the local store of this
// instance's share, so that the key is fresh whichever decides it next. An
// error from Redis is returned after the local reset.
func (f *Fallback) Reset(ctx context.Context, id store.LimitID, key string) error {
	if !f.known(f.load(), id) {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	if l := f.local.Load(); l != nil {
		_ = l.mem.Reset(ctx, id, key) // the ids line up; a held place resets nothing
	}
	return f.redis.Reset(ctx, id, key)
}

// Refund gives back req's hits in Redis (store.Refunder), in one script
// call on the server's clock: a window's count while the window holds it,
// a bucket's debt, a sliding log's latest admissions still in its window;
// concurrency hits are left to their leases. res is not needed on Redis
// (no key there counts on a shared overflow state) but must be the
// admitting result. Errors are Decide's; a lost reply is not retried.
func (s *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return fmt.Errorf("store: Refund needs a request and the admitting result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	if !res.Allowed || res.N != req.N {
		return fmt.Errorf("store: Refund of a decision that did not admit these %d hits", req.N)
	}
	var lim [store.MaxHits]*limit
	keys, args, err := s.scriptArgs(req, -req.N, res, &lim)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, &s.decide, keys, args)
	return err
}

// Refund gives back req's hits on Redis, and on the local store when this
// instance decided them there (a Fallback in degraded mode): the local
// store is asked when the breaker is open, Redis otherwise.
func (f *Fallback) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	for i := range req.Hits[:min(max(req.N, 0), store.MaxHits)] {
		if !f.known(f.load(), req.Hits[i].Limit) {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, req.Hits[i].Limit)
		}
	}
	if f.open.Load() {
		return f.localFor().mem.Refund(ctx, req, res)
	}
	return f.redis.Refund(ctx, req, res)
}
