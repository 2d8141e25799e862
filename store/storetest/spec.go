package storetest

import (
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// SpecOf returns the spec named name of alg admitting limit per period: a
// token bucket of limit refilled at limit per period, windows of period,
// leases of period (store.Concurrency). It is valid for a positive limit
// and period.
func SpecOf(alg store.Algorithm, name string, limit int64, period time.Duration) store.Spec {
	s := store.Spec{Name: name, Algorithm: alg, Limit: limit}
	switch alg {
	case store.TokenBucket:
		s.Rate = ratelimit.Per(limit, period)
	case store.Concurrency:
		s.LeaseTTL = period
	default:
		s.Window = period
	}
	return s
}
