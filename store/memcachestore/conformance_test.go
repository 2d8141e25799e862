package memcachestore_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcachestore"
	"github.com/sluicehq/sluice/store/storetest"
)

// harnessStart is the harness's Request.Now before any advance.
const harnessStart = int64(1) << 40

// harnessStore resets at the harness's clock: the harness decides at its
// own Now, from harnessStart, and resets without advancing it.
type harnessStore struct{ *memcachestore.Store }

func (h harnessStore) Reset(ctx context.Context, id store.LimitID, key string) error {
	return h.ResetAt(ctx, id, key, harnessStart)
}

// TestConformance runs the store conformance harness on a private
// memcached, each subtest under a prefix of its own, at the harness's
// Request.Now (the store decides on the caller's clock, so no subtest
// waits). Subtests of algorithms this store refuses are skipped by name.
func TestConformance(t *testing.T) {
	srv := startServer(t)
	c := srv.client()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := memcachestore.New(c, memcachestore.WithPrefix("t"+rand.Text()))
		if err != nil {
			t.Fatal(err)
		}
		return harnessStore{s}
	}, storetest.WithSkip("memcachestore keeps fixed windows only",
		"token_bucket", "sliding_window", "sliding_log", "concurrency", "/max_hits", "/lease/", "/unregister", "/update/lease_ttl"))
}
