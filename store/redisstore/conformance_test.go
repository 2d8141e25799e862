package redisstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// conformanceWait is the harness's longest real wait per test: windows and
// lease TTLs of a quarter of it.
const conformanceWait = 400 * time.Millisecond

// TestConformance runs the store conformance harness on the shared Redis,
// each subtest under a prefix of its own.
func TestConformance(t *testing.T) {
	c := sharedClient(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := redisstore.New(c, redisstore.WithPrefix(testPrefix(t, c)), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.WithServerTime(conformanceWait))
}

// TestFallbackConformance runs the harness on a Fallback while Redis
// answers. (While it is down, leases carry the local bit in their Limit,
// which the harness does not expect: TestFallbackUnregisterLocal covers
// Unregister there.)
func TestFallbackConformance(t *testing.T) {
	c := sharedClient(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := redisstore.New(c, redisstore.WithPrefix(testPrefix(t, c)), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		f, err := redisstore.NewFallback(s, fallback.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}, storetest.WithServerTime(conformanceWait))
}
