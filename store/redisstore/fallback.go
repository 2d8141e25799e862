package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
)

// Fallback is a fallback.Store around a Redis Store: it decides on Redis
// while Redis answers and on a local share of each limit when it does not
// (see package fallback).
type Fallback = fallback.Store

// FallbackStats is a snapshot of a Fallback's mode and counters.
type FallbackStats = fallback.Stats

// NewFallback returns a fallback.Store around s whose instances are counted
// by a heartbeat in Redis: a sorted set under the store's prefix, scored by
// each instance's last beat on Redis's clock. The Fallbacks around one
// Store are one instance in it, which leaves the set when the last of them
// Closes. Options are package fallback's (fallback.WithTripAfter, ...);
// log lines name the backend "Redis". Errors are fallback.New's, and one
// for a nil s.
func NewFallback(s *Store, opts ...fallback.Option) (*Fallback, error) {
	if s == nil {
		return nil, errors.New("redisstore: nil store")
	}
	return s.fallbacks.Fallback(s, opts)
}

// beat runs the heartbeat script: join (or refresh) and count, or leave
// the set; the membership.Beat of s.fallbacks.
func (s *Store) beat(ctx context.Context, memory time.Duration, join bool) (int64, error) {
	flag := "1"
	if !join {
		flag = "0"
	}
	vals, err := s.run(ctx, &s.heartbeat, []string{s.instancesKey()}, []any{s.instance, int64(memory / time.Microsecond), flag})
	if err != nil {
		return 0, err
	}
	return replyInt(vals, 2)
}

var _ fallback.RequestChecker = (*Store)(nil)

// CheckRequest returns the error Decide returns for req's shape on this
// store (fallback.RequestChecker): with WithKeyTags, hits whose keys carry
// different hash tags. req must have passed store.Request.Check. It does
// no I/O.
func (s *Store) CheckRequest(req *store.Request) error { return s.checkTags(req) }
