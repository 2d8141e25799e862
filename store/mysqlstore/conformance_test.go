package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// conformanceWait is the harness's longest real wait per test: windows of a
// quarter of it.
const conformanceWait = 400 * time.Millisecond

// unsupported are the harness's subtests that need an algorithm the MySQL
// store refuses at Register, or that register every algorithm.
var unsupported = storetest.WithSkip("mysqlstore keeps token buckets and fixed windows only",
	"sliding_window", "sliding_log", "concurrency", "/max_hits", "/lease/", "/unregister", "/update/lease_ttl")

// TestConformance runs the store conformance harness on the shared
// MariaDB, each subtest under a prefix of its own. Subtests that need an
// algorithm this store does not keep are skipped by name (TestUnregister
// covers Unregister on the algorithms it keeps).
func TestConformance(t *testing.T) {
	db := sharedDB(t)
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, db) },
		storetest.WithServerTime(conformanceWait), unsupported)
}
