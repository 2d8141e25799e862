package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

var (
	_ store.Resetter = (*Store)(nil)
	_ store.Resetter = (*Fallback)(nil)
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
