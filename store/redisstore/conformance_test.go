package redisstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
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
